//go:build !linux

package native

import "github.com/agentbox/agentbox/internal/engine"

func start(req []byte, io engine.IO) (*engine.Box, error) { return nil, engine.ErrNotSupported }

// Prestart is not supported off Linux.
func (*Engine) Prestart() (engine.Prestarted, error) { return nil, engine.ErrNotSupported }

// BoxInitMain is the entry point of `agentbox box-init`; the native engine is Linux-only.
func BoxInitMain(args []string) int { return 1 }
