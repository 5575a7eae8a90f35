package main

import (
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/shim"
)

// hiddenEntries are the re-exec entry points; they are not CLI subcommands and take no flags
// from users.
var hiddenEntries = map[string]func(args []string) int{
	"box-shim": shim.Main,
	"box-init": native.BoxInitMain,
	"box-exec": native.BoxExecMain,
}
