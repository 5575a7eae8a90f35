//go:build !linux

package readiness

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// LockFile serializes probes of every process of the user.
const LockFile = "readiness.lock"

// Probe is not supported off Linux: it fails with ReasonBoxSetupFailed.
func Probe(ctx context.Context, o ProbeOptions) *Result {
	return &Result{Engine: o.Engine, Started: time.Now(), Kernel: HostFacts(),
		Err: &Error{Reason: ReasonBoxSetupFailed, Detail: ErrNotSupported.Error()}}
}

// Reclaim is not supported off Linux.
func Reclaim(runtimeDir, home string, log *slog.Logger) error { return ErrNotSupported }

// AttestMain is the entry point of `agentbox readiness-attest`; probes are Linux-only.
func AttestMain(args []string) int {
	fmt.Fprintln(os.Stderr, ErrNotSupported)
	return 1
}

// HostFacts returns nothing off Linux.
func HostFacts() map[string]string { return map[string]string{} }

func currentKey(engineName, cfg, exe, helper, helperID string) Key {
	return Key{Engine: engineName, Config: cfg}
}
