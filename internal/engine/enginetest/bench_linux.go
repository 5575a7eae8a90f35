package enginetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/plan"
)

// BenchStart measures an engine's box start to program exec inside the shim: from Engine.Start
// until the box reports that p's program was exec'd (namespaces, mounts, the exec stage's
// caps, Landlock and seccomp all done). It reports the median and p95 of the iterations
// besides the mean.
func BenchStart(b *testing.B, e engine.Engine, p *plan.Plan) {
	benchStarts(b, e, p, func(b *testing.B) startFunc {
		shimEnd, boxEnd, err := engine.ControlPair()
		if err != nil {
			b.Fatal(err)
		}
		return func(req []byte, io engine.IO) (*engine.Box, *os.File, error) {
			io.Control = boxEnd
			box, err := e.Start(req, io)
			boxEnd.Close()
			return box, shimEnd, err
		}
	})
}

// PrestartSettle is how long BenchPrestarted lets a prestarted box start up and reach its
// wait for the request before the clock starts, as a spare shim's box has long before its
// launch.
const PrestartSettle = 150 * time.Millisecond

// BenchPrestarted measures the path a launch takes with a spare shim: from handing p's request
// to a box the engine (an engine.Prestarter) prestarted before the clock started
// (Prestarted.Start) until the program was exec'd. It reports the median and p95 besides the
// mean.
func BenchPrestarted(b *testing.B, e engine.Engine, p *plan.Plan) {
	pr, ok := e.(engine.Prestarter)
	if !ok {
		b.Fatalf("engine %s cannot prestart a box", e.Name())
	}
	benchStarts(b, e, p, func(b *testing.B) startFunc {
		pre, err := pr.Prestart()
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(PrestartSettle)
		return func(req []byte, io engine.IO) (*engine.Box, *os.File, error) {
			box, err := pre.Start(req, io)
			return box, pre.Control(), err
		}
	})
}

// startFunc starts one box for req with the program's streams in io, and returns it and the
// shim's end of its control channel.
type startFunc func(req []byte, io engine.IO) (*engine.Box, *os.File, error)

// benchStarts times b.N box starts of p's request, from the start until the program's exec;
// ready, outside the clock, readies each start.
func benchStarts(b *testing.B, e engine.Engine, p *plan.Plan, ready func(*testing.B) startFunc) {
	req, err := e.Request(p)
	if err != nil {
		b.Fatal(err)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	var samples []time.Duration
	b.StopTimer()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := ready(b)
		b.StartTimer()
		t0 := time.Now()
		box, ctl, err := start(req, engine.IO{Stdin: devnull, Stdout: devnull, Stderr: devnull})
		if err != nil {
			b.Fatal(err)
		}
		AwaitExec(b, ctl)
		samples = append(samples, time.Since(t0))
		b.StopTimer()
		box.Process.Wait()
		ctl.Close()
	}
	ReportQuantiles(b, samples)
}

// StagedPlan is a plan running /bin/true with four staged copies of protected files bound in
// the workspace (.envrc, .mcp.json, .git/config, .claude/settings.json, 4 KiB each), as the
// integrity broker binds them: what staging costs a box's start.
func StagedPlan(b *testing.B) *plan.Plan {
	staged := b.TempDir()
	p, _ := NewPlan(b, "/bin/true", nil, func(in *plan.Input) {
		var ps []plan.Protected
		for _, rel := range []string{".envrc", ".mcp.json", ".git/config", ".claude/settings.json"} {
			for _, f := range []string{filepath.Join(in.Workspace, rel), filepath.Join(staged, rel)} {
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(f, bytes.Repeat([]byte("x"), 4096), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			ps = append(ps, plan.Protected{Path: filepath.Join(in.Workspace, rel), Beneath: in.Workspace, Staged: filepath.Join(staged, rel)})
		}
		in.Brokers.Mounts = plan.ProtectMounts(ps)
	})
	return p
}

// ReportQuantiles reports the median and p95 of samples as the benchmark's metrics.
func ReportQuantiles(b *testing.B, samples []time.Duration) {
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(samples[len(samples)*95/100].Microseconds())/1000, "p95-ms")
}

// AwaitExec reads the box's control events until the program was exec'd; a box error fails b.
func AwaitExec(b *testing.B, ctl *os.File) {
	for {
		ev, fds, err := engine.RecvEvent(ctl)
		for _, fd := range fds {
			os.NewFile(uintptr(fd), "fd").Close()
		}
		if err != nil {
			b.Fatalf("no exec event: %v", err)
		}
		switch ev.Kind {
		case engine.EventExec:
			return
		case engine.EventError:
			b.Fatalf("box error: %s: %s", ev.Code, ev.Message)
		}
	}
}

// HomeBindsPlan is a plan running /bin/true with n files of a harness folder beneath the home
// (4 KiB each, as ~/.claude's allowlisted entries are) bound read-only into the box's home one
// by one, as a profile's wiring binds them; with folded, the folder holding them is bound once
// instead: what one bind of a prepared folder would save a box's start against a bind per
// entry.
func HomeBindsPlan(b *testing.B, n int, folded bool) *plan.Plan {
	p, _ := NewPlan(b, "/bin/true", nil, func(in *plan.Input) {
		host := filepath.Join(b.TempDir(), ".harness")
		if err := os.MkdirAll(host, 0o755); err != nil {
			b.Fatal(err)
		}
		target := filepath.Join(in.Home, ".harness")
		if folded {
			in.Brokers.Mounts = append(in.Brokers.Mounts, plan.Mount{Kind: plan.MountBind, Source: host, Target: target, ReadOnly: true})
		}
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("entry%02d.json", i)
			if err := os.WriteFile(filepath.Join(host, name), bytes.Repeat([]byte("x"), 4096), 0o644); err != nil {
				b.Fatal(err)
			}
			if !folded {
				in.Brokers.Mounts = append(in.Brokers.Mounts, plan.Mount{Kind: plan.MountBind, Source: filepath.Join(host, name),
					Target: filepath.Join(target, name), ReadOnly: true})
			}
		}
	})
	return p
}
