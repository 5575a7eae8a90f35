package readiness_test

import (
	"os"
	"testing"

	"github.com/agentbox/agentbox/internal/engine/bwrap"
	"github.com/agentbox/agentbox/internal/engine/execstage"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/readiness"
	"github.com/agentbox/agentbox/internal/shim"
)

// entries are the hidden entry points of the agentbox binary: the test binary stands in for it
// (shims, boxes and the attester are all this binary re-executed), plus the test's helpers.
var entries = map[string]func([]string) int{
	"box-shim":              shim.Main,
	"box-init":              native.BoxInitMain,
	"box-exec":              execstage.Main,
	"bwrap-monitor":         bwrap.MonitorMain,
	"bwrap-init":            bwrap.InitMain,
	readiness.AttestCommand: readiness.AttestMain,
}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if e, ok := entries[os.Args[1]]; ok {
			os.Exit(e(os.Args[2:]))
		}
		if h, ok := helpers[os.Args[1]]; ok {
			os.Exit(h(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}
