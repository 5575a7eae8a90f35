package native_test

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/plan"
)

// BenchmarkStartToExec measures box start to program exec inside the shim: from Engine.Start
// (the re-exec of box-init with seven namespaces) until box-init reports that /bin/true was
// exec'd (mounts, pivot_root, lo, the exec stage's caps, Landlock and seccomp all done). It
// reports the median and p95 of the iterations besides the mean.
func BenchmarkStartToExec(b *testing.B) {
	p, _ := enginetest.NewPlan(b, "/bin/true", nil, nil)
	benchStartToExec(b, p)
}

// BenchmarkStartToExecStaged is BenchmarkStartToExec with four staged copies of protected
// files bound in the workspace (.envrc, .mcp.json, .git/config, .claude/settings.json, 4 KiB
// each), as the integrity broker binds them: what staging costs a box's start (each copy on a
// tmpfs of its own, copied in).
func BenchmarkStartToExecStaged(b *testing.B) {
	staged := b.TempDir()
	p, _ := enginetest.NewPlan(b, "/bin/true", nil, func(in *plan.Input) {
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
	benchStartToExec(b, p)
}

func benchStartToExec(b *testing.B, p *plan.Plan) {
	e := &native.Engine{}
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
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		shimEnd, boxEnd, err := engine.ControlPair()
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		box, err := e.Start(req, engine.IO{Control: boxEnd, Stdin: devnull, Stdout: devnull, Stderr: devnull})
		boxEnd.Close()
		if err != nil {
			b.Fatal(err)
		}
		awaitExec(b, shimEnd)
		samples = append(samples, time.Since(t0))
		b.StopTimer()
		box.Process.Wait()
		shimEnd.Close()
		b.StartTimer()
	}
	b.StopTimer()
	reportQuantiles(b, samples)
}

func reportQuantiles(b *testing.B, samples []time.Duration) {
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(samples[len(samples)*95/100].Microseconds())/1000, "p95-ms")
}

// BenchmarkPrestartedToExec measures the path a launch takes with a spare shim: from handing
// the request to a prestarted box-init (native.Prestart, done before the clock starts, as a
// spare shim does it before its launch) until /bin/true was exec'd.
func BenchmarkPrestartedToExec(b *testing.B) {
	p, _ := enginetest.NewPlan(b, "/bin/true", nil, nil)
	req, err := (&native.Engine{}).Request(p)
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
	for i := 0; i < b.N; i++ {
		pre, err := native.Prestart(spec.DenyNamespaces())
		if err != nil {
			b.Fatal(err)
		}
		// Let box-init and its box-exec start up, warm up (native.WarmUp) and reach their wait, as
		// a spare's have long before its launch.
		time.Sleep(150 * time.Millisecond)
		b.StartTimer()
		t0 := time.Now()
		box, err := pre.Start(req, engine.IO{Stdin: devnull, Stdout: devnull, Stderr: devnull})
		if err != nil {
			b.Fatal(err)
		}
		awaitExec(b, pre.Control())
		samples = append(samples, time.Since(t0))
		b.StopTimer()
		box.Process.Wait()
		pre.Control().Close()
	}
	reportQuantiles(b, samples)
}

// awaitExec reads the box's control events until the program was exec'd.
func awaitExec(b *testing.B, ctl *os.File) {
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
