package bwrap_test

import (
	"os/exec"
	"testing"

	"github.com/agentbox/agentbox/internal/engine/bwrap"
	"github.com/agentbox/agentbox/internal/engine/enginetest"
)

// BenchmarkStartToExec measures a bwrap box's start to program exec inside the shim (the
// monitor, bwrap, bwrap-init, the exec stage), with nothing for bwrap-init to keep.
func BenchmarkStartToExec(b *testing.B) {
	if _, err := exec.LookPath(bwrap.Program); err != nil {
		b.Skipf("bwrap is not installed: %v", err)
	}
	p, _ := enginetest.NewPlan(b, "/bin/true", nil, nil)
	enginetest.BenchStart(b, &bwrap.Engine{}, p)
}

// BenchmarkStartToExecStaged is BenchmarkStartToExec with four staged copies of protected files
// bound in the workspace: bwrap-init re-executes itself in a mount namespace of its own, puts
// each copy on a tmpfs of its own and keeps the binds (what a launch with protected files
// costs the bwrap engine).
func BenchmarkStartToExecStaged(b *testing.B) {
	if _, err := exec.LookPath(bwrap.Program); err != nil {
		b.Skipf("bwrap is not installed: %v", err)
	}
	enginetest.BenchStart(b, &bwrap.Engine{}, enginetest.StagedPlan(b))
}
