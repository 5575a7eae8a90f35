// Package builtins registers the engines this agentbox builds boxes with (native and bwrap):
// a program that looks engines up by name (engine.Get) imports it for that, and nothing else
// imports an engine's package except the box helper's entry points (internal/boxmain), so that
// the rest of the tree depends only on the engine interface (containerd's cmd/containerd/builtins).
package builtins

import (
	_ "github.com/agentbox/agentbox/internal/engine/bwrap"  // registers "bwrap"
	_ "github.com/agentbox/agentbox/internal/engine/native" // registers "native"
)
