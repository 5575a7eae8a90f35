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
		"github.com/agentbox/agentbox/internal/engine/builtins", "github.com/agentbox/agentbox/internal/engine/execstage",
		"github.com/agentbox/agentbox/internal/engine/bwrap", "github.com/agentbox/agentbox/internal/boxmain",
		"github.com/agentbox/agentbox/internal/shim", "github.com/agentbox/agentbox/internal/integrity",
	}
	// Nor the configuration's parsers and checks (two YAML libraries, the brokers' config
	// types), the profiles or the attack battery: the commands that need them are the daemon
	// binary's (HeavyCommands).
	cliOnly := []string{
		"github.com/agentbox/agentbox/internal/config", "github.com/agentbox/agentbox/internal/profile",
		"github.com/agentbox/agentbox/internal/attack", "github.com/agentbox/agentbox/internal/selftest",
		"github.com/agentbox/agentbox/internal/cli/heavy", "github.com/goccy/go-yaml", "go.yaml.in/yaml/v4",
		"golang.org/x/crypto/ssh", "github.com/invopop/jsonschema",
	}
	cli := list("github.com/agentbox/agentbox/cmd/agentbox")
	for _, p := range append(heavy, cliOnly...) {
		if cli[p] {
			t.Errorf("the agentbox CLI links %s", p)
		}
	}
	daemon := list("github.com/agentbox/agentbox/cmd/agentbox-daemon")
	for _, p := range append(append(heavy, cliOnly...), "github.com/agentbox/agentbox/internal/cli") {
		if p != "github.com/agentbox/agentbox/internal/engine/bwrap" && !daemon[p] {
			t.Errorf("the daemon binary lacks %s", p)
		}
	}
}

// TestRunsHeavy: the CLI hands a heavy command to the daemon binary however it is asked for
// (directly, through help, or by a shell's completion request), and nothing else.
func TestRunsHeavy(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"config", "show"}, true},
		{[]string{"wrap", "install", "--prefix", "/x"}, true},
		{[]string{"--help", "selftest"}, true},
		{[]string{"help", "profiles"}, true},
		{[]string{"__complete", "config", "s"}, true},
		{[]string{"__completeNoDesc", "wrap", ""}, true},
		{[]string{"run", "config"}, false},
		{[]string{"run", "--", "wrap"}, false},
		{[]string{"--", "config"}, false},
		{[]string{"launches"}, false},
		// The daemon binary's hidden entry points are never reached through the CLI.
		{[]string{"box-init", "-wait"}, false},
		{[]string{"attack-probe", "config"}, false},
		{[]string{"readiness-attest"}, false},
		{[]string{"help"}, false},
		{nil, false},
	} {
		if got := runsHeavy(c.args); got != c.want {
			t.Errorf("runsHeavy(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
