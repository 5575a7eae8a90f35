package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCLILinksNoDaemon: the agentbox CLI (cmd/agentbox), which every `agentbox run` starts,
// links neither the daemon nor what only the daemon needs (SQLite, the store, the readiness
// probe, the engines, the brokers): Go's start-up grows with the binary (docs/benchmarks.md).
// The daemon binary (cmd/agentbox-daemon) has it all.
func TestCLILinksNoDaemon(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go toolchain: %v", err)
	}
	list := func(pkg string) map[string]bool {
		out, err := exec.Command(gobin, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			deps[p] = true
		}
		return deps
	}
	heavy := []string{
		"modernc.org/sqlite", "database/sql",
		"github.com/agentbox/agentbox/internal/daemon", "github.com/agentbox/agentbox/internal/store",
		"github.com/agentbox/agentbox/internal/readiness", "github.com/agentbox/agentbox/internal/engine/native",
		"github.com/agentbox/agentbox/internal/engine/bwrap", "github.com/agentbox/agentbox/internal/boxmain",
		"github.com/agentbox/agentbox/internal/shim", "github.com/agentbox/agentbox/internal/integrity",
	}
	// (The configuration's types and checks link the ssh broker's config and the egress
	// allowlist parser; `agentbox config` and the profiles need them.)
	cli := list("github.com/agentbox/agentbox/cmd/agentbox")
	for _, p := range heavy {
		if cli[p] {
			t.Errorf("the agentbox CLI links %s", p)
		}
	}
	daemon := list("github.com/agentbox/agentbox/cmd/agentbox-daemon")
	for _, p := range append(heavy, "github.com/agentbox/agentbox/internal/cli") {
		if p != "github.com/agentbox/agentbox/internal/engine/bwrap" && !daemon[p] {
			t.Errorf("the daemon binary lacks %s", p)
		}
	}
}
