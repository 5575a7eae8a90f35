//go:build !linux

package bwrap

import "github.com/agentbox/agentbox/internal/engine"

// Start is not supported off Linux.
func (e *Engine) Start(req []byte, io engine.IO) (*engine.Box, error) {
	return nil, engine.ErrNotSupported
}

// MonitorMain is the entry point of `agentbox bwrap-monitor`; the bwrap engine is Linux-only.
func MonitorMain(args []string) int { return 1 }

// InitMain is the entry point of `agentbox bwrap-init`; the bwrap engine is Linux-only.
func InitMain(args []string) int { return 1 }
