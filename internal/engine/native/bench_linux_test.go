package native_test

import (
	"os"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/engine/spec"
)

// BenchmarkStartToExec measures box start to program exec inside the shim: from Engine.Start
// (the re-exec of box-init with seven namespaces) until box-init reports that /bin/true was
// exec'd (mounts, pivot_root, lo, the exec stage's caps, Landlock and seccomp all done). It
// reports the median and p95 of the iterations besides the mean.
func BenchmarkStartToExec(b *testing.B) {
	p, _ := enginetest.NewPlan(b, "/bin/true", nil, nil)
	enginetest.BenchStart(b, &native.Engine{}, p)
}

// BenchmarkStartToExecStaged is BenchmarkStartToExec with four staged copies of protected
// files bound in the workspace (.envrc, .mcp.json, .git/config, .claude/settings.json, 4 KiB
// each), as the integrity broker binds them: what staging costs a box's start (each copy on a
// tmpfs of its own, copied in).
func BenchmarkStartToExecStaged(b *testing.B) {
	enginetest.BenchStart(b, &native.Engine{}, enginetest.StagedPlan(b))
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
		enginetest.AwaitExec(b, pre.Control())
		samples = append(samples, time.Since(t0))
		b.StopTimer()
		box.Process.Wait()
		pre.Control().Close()
	}
	enginetest.ReportQuantiles(b, samples)
}
