package main

import (
	"github.com/agentbox/agentbox/internal/attack"
	"github.com/agentbox/agentbox/internal/engine/bwrap"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/readiness"
	"github.com/agentbox/agentbox/internal/shim"
)

// hiddenEntries are the re-exec entry points; they are not CLI subcommands and take no flags
// from users.
var hiddenEntries = map[string]func(args []string) int{
	"box-shim":              shim.Main,
	"box-init":              native.BoxInitMain,
	"box-exec":              native.BoxExecMain,
	"bwrap-monitor":         bwrap.MonitorMain,
	"bwrap-init":            bwrap.InitMain,
	readiness.AttestCommand: readiness.AttestMain,
	// attack-probe runs the attack suite's attempts inside a box (e2e tests, selftest).
	attack.ProbeCommand: attack.ProbeMain,
}
