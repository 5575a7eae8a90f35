// Package daemonmain is what the daemon binary (cmd/agentbox-daemon) adds to the CLI: the
// daemon itself, an in-process readiness probe, and the hidden entry points that run in and
// around boxes (box-shim, box-init, …, readiness-attest). The agentbox CLI does not link it
// (internal/cli.Heavy), so that it starts quickly.
package daemonmain

import (
	"context"
	"fmt"
	"github.com/agentbox/agentbox/internal/harnessstate"
	"os"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/attack"
	"github.com/agentbox/agentbox/internal/boxmain"
	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/cli/heavy"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/daemon"
	// The engines the daemon and its readiness probe start boxes with, looked up by name
	// (engine.Get): registered by the program, so that neither package depends on an engine.
	_ "github.com/agentbox/agentbox/internal/engine/builtins"
	"github.com/agentbox/agentbox/internal/readiness"
	"github.com/agentbox/agentbox/internal/safesocket"
)

// Install fills cli.Heavy.
func Install() {
	// The daemon reports the version it was built as (the CLI compares it with its own).
	cli.Heavy.RunDaemon = func(ctx context.Context) error {
		// An auto-started daemon inherits the cwd of the first `agentbox run`, a workspace a
		// box writes: nothing the daemon runs (go env GOPROXY, git, …) may start there.
		if err := os.Chdir("/"); err != nil {
			return fmt.Errorf("daemon: chdir /: %w", err)
		}
		return daemon.Run(ctx, daemon.Options{Version: cli.Version})
	}
	cli.Heavy.RunSystem = func(ctx context.Context, every time.Duration) error {
		return daemon.RunSystem(ctx, daemon.SystemOptions{Interval: every})
	}
	cli.Heavy.Probe = probe
	cli.Heavy.Commands = heavy.Commands
}

// Entries are the daemon binary's hidden re-exec entry points (argv[1]); they are not CLI
// subcommands and take no flags from users.
func Entries() map[string]func(args []string) int {
	m := map[string]func(args []string) int{
		readiness.AttestCommand: readiness.AttestMain,
		// attack-probe runs the attack suite's attempts inside a box (e2e tests, selftest).
		attack.ProbeCommand: attack.ProbeMain,
		// harness-scrub edits a box's OpenCode database, confined by Landlock (harnessstate).
		harnessstate.ScrubCommand: harnessstate.ScrubMain,
	}
	for name, entry := range boxmain.Entries {
		m[name] = entry
	}
	return m
}

// probe runs one readiness probe in this process, under the same lock as the daemon's probes.
func probe(ctx context.Context, engineName string) (*api.Readiness, error) {
	eff, err := config.Load(config.LoadOptions{})
	if err != nil {
		return nil, err
	}
	cfg := eff.Config.WithDefaults()
	if engineName != "" {
		cfg.Engine = engineName
	}
	rt, err := safesocket.RuntimeDir()
	if err != nil {
		r := (&readiness.Result{Engine: cfg.Engine, Started: time.Now(), Kernel: readiness.HostFacts(),
			Err: &readiness.Error{Reason: readiness.ReasonRuntimeDirRefused, Detail: err.Error()}}).Readiness()
		return &r, nil
	}
	res := readiness.Probe(ctx, readiness.ProbeOptions{Engine: cfg.Engine, Config: cfg, RuntimeDir: rt})
	r := res.Readiness()
	r.Attempts = 1
	return &r, nil
}
