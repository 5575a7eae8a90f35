package bwrap_test

import (
	"os/exec"
	"testing"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/bwrap"
	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/engine/execstage"
)

func TestMain(m *testing.M) {
	enginetest.Main(m, map[string]func([]string) int{
		"bwrap-monitor": bwrap.MonitorMain,
		"bwrap-init":    bwrap.InitMain,
		"box-exec":      execstage.Main,
	})
}

func TestConformance(t *testing.T) {
	if _, err := exec.LookPath(bwrap.Program); err != nil {
		t.Skipf("bwrap is not installed: %v", err)
	}
	enginetest.Run(t, func() engine.Engine { return &bwrap.Engine{} })
}
