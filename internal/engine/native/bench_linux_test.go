package native_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/engine/native"
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
// the request to a prestarted box-init (Engine.Prestart, done before the clock starts, as a
// spare shim does it before its launch) until /bin/true was exec'd.
func BenchmarkPrestartedToExec(b *testing.B) {
	p, _ := enginetest.NewPlan(b, "/bin/true", nil, nil)
	enginetest.BenchPrestarted(b, &native.Engine{}, p)
}

// BenchmarkPrestartedToExecHomeBinds is BenchmarkPrestartedToExec with 48 files of a harness
// folder bound read-only into the home one by one (a claude box's plan has 50 binds beneath
// the home), against the folder bound once (Folded): what folding a profile's per-entry binds
// into one bind of a prepared folder would save the box's start.
func BenchmarkPrestartedToExecHomeBinds(b *testing.B) {
	for _, folded := range []bool{false, true} {
		name := "PerEntry"
		if folded {
			name = "Folded"
		}
		b.Run(name, func(b *testing.B) {
			enginetest.BenchPrestarted(b, &native.Engine{}, enginetest.HomeBindsPlan(b, 48, folded))
		})
	}
}
