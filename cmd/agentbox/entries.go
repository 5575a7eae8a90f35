package main

import (
	"github.com/agentbox/agentbox/internal/attack"
)

// hiddenEntries are the CLI's re-exec entry points; they are not CLI subcommands and take no
// flags from users. (The box's own entry points are in the daemon binary and the box helper.)
var hiddenEntries = map[string]func(args []string) int{
	// attack-probe runs the attack suite's attempts inside a box (e2e tests, selftest).
	attack.ProbeCommand: attack.ProbeMain,
}
