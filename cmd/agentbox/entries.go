package main

import (
	"github.com/agentbox/agentbox/internal/attack"
	"github.com/agentbox/agentbox/internal/boxmain"
	"github.com/agentbox/agentbox/internal/readiness"
)

// hiddenEntries are the re-exec entry points; they are not CLI subcommands and take no flags
// from users.
var hiddenEntries = map[string]func(args []string) int{
	readiness.AttestCommand: readiness.AttestMain,
	// attack-probe runs the attack suite's attempts inside a box (e2e tests, selftest).
	attack.ProbeCommand: attack.ProbeMain,
}

func init() {
	for name, entry := range boxmain.Entries {
		hiddenEntries[name] = entry
	}
}
