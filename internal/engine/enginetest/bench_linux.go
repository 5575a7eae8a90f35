package enginetest

import (
	"bytes"
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
		AwaitExec(b, shimEnd)
		samples = append(samples, time.Since(t0))
		b.StopTimer()
		box.Process.Wait()
		shimEnd.Close()
		b.StartTimer()
	}
	b.StopTimer()
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
