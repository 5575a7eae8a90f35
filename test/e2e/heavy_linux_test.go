package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/attack"
	"github.com/agentbox/agentbox/internal/selftest"
)

// TestHeavyCommands runs, through the CLI, the commands only the daemon binary links (the CLI
// runs the daemon binary in its place for them): each works as it did when the CLI had it.
func TestHeavyCommands(t *testing.T) {
	e := NewEnv(t)

	t.Run("Help", func(t *testing.T) {
		r := e.Run("", "--help")
		for _, name := range []string{"config", "profiles", "selftest", "wrap", "run"} {
			if !strings.Contains(r.Stdout, "\n  "+name+" ") {
				t.Errorf("agentbox --help does not list %s:\n%s", name, r.Stdout)
			}
		}
		if r := e.Run("", "help", "config"); r.Code != 0 || !strings.Contains(r.Stdout, "agentbox config [command]") || !strings.Contains(r.Stdout, "validate") {
			t.Errorf("agentbox help config: exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		if r := e.Run("", "__complete", "config", ""); !strings.Contains(r.Stdout, "validate") {
			t.Errorf("completion of `agentbox config `: %q", r.Stdout)
		}
	})

	t.Run("ConfigValidate", func(t *testing.T) {
		bad := filepath.Join(e.Root, "bad.yaml")
		if err := os.WriteFile(bad, []byte("egress: sideways\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := e.Run("", "config", "validate", bad)
		if r.Code == 0 || !strings.Contains(r.Stderr, bad) || !strings.Contains(r.Stderr, "egress") {
			t.Errorf("config validate of a bad file: exit %d: %s", r.Code, r.Stderr)
		}
		good := filepath.Join(e.Root, "good.yaml")
		if err := os.WriteFile(good, []byte("egress: deny\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := e.Run("", "config", "validate", good); r.Code != 0 {
			t.Errorf("config validate of a good file: exit %d: %s", r.Code, r.Stderr)
		}
	})

	// Launchers installed without --agentbox run the CLI installed with the daemon binary that
	// wrote them, not the daemon binary.
	t.Run("WrapDefaultsToCLI", func(t *testing.T) {
		prefix := filepath.Join(e.Root, "wrap")
		if r := e.Run("", "wrap", "install", "--prefix", prefix, "--program", "fakeagent"); r.Code != 0 {
			t.Fatalf("wrap install: exit %d: %s", r.Code, r.Stderr)
		}
		b, err := os.ReadFile(filepath.Join(prefix, "fakeagent"))
		if err != nil {
			t.Fatal(err)
		}
		cli, err := filepath.EvalSymlinks(agentboxBin)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "\nagentbox="+cli+"\n") && !strings.Contains(string(b), "\nagentbox='"+cli+"'\n") {
			t.Errorf("the launcher does not run %s:\n%s", cli, b)
		}
	})

	// selftest runs the battery from the daemon binary: its boxes run the probe from it.
	t.Run("Selftest", func(t *testing.T) {
		names := []string{"read-home-ssh", "handoff-file"}
		for _, n := range names {
			if _, ok := attack.Lookup(n); !ok {
				t.Fatalf("no attempt %s", n)
			}
		}
		r := e.Run("", "selftest", "--json", "--run", "^("+strings.Join(names, "|")+")$")
		var rep selftest.Report
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("selftest --json: exit %d: %v\n%s%s", r.Code, err, r.Stdout, r.Stderr)
		}
		if r.Code != 0 || rep.Passed != len(names) || rep.Failed != 0 {
			t.Errorf("selftest: exit %d, %d passed, %d failed (want %d passed): %+v", r.Code, rep.Passed, rep.Failed, len(names), rep.Results)
		}
	})
}
