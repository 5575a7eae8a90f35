// Package boxmain holds the hidden re-exec entry points that build and run boxes (the shim and
// each engine's in-box init). Both binaries serve them: agentbox-box, the small helper the daemon
// runs shims from so that each process of a launch starts fast, and agentbox itself, which the
// daemon falls back to when no matching helper is installed beside it.
package boxmain

import (
	"github.com/agentbox/agentbox/internal/engine/bwrap"
	"github.com/agentbox/agentbox/internal/engine/execstage"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/shim"
)

// Entries are the entry points by argv[1]. They take no flags from users.
var Entries = map[string]func(args []string) int{
	"box-shim":      shim.Main,
	"box-init":      native.BoxInitMain,
	"box-exec":      execstage.Main,
	"bwrap-monitor": bwrap.MonitorMain,
	"bwrap-init":    bwrap.InitMain,
}
