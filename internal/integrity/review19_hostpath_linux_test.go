package integrity_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackCredentialHelperScriptArgument (review 19, F3): plan.CheckHostPath refuses a
// workspace holding a credential helper the configuration names (TestDaemonPathRefusesWorkspace)
// by its command's first word only. A helper written the ordinary way for a script, an
// interpreter and the script's path (command: [/bin/sh, WS/scripts/token], [python3, …],
// [node, …]), leaves the script in the workspace unchecked: the launch is accepted, the box
// rewrites scripts/token, and the relay runs it on the host, unboxed, as the user, at its first
// request. docs/security.md: "a workspace holding one is refused too". And a helper named by
// its absolute path in the workspace that does not exist at the launch (not installed yet,
// made by a build step, removed) is not found (hostprog.Find fails, nothing is recorded): the
// launch is accepted, the box makes the file, and the relay, which looks a program not found
// up again at its use, runs it at the box's first request.
func TestAttackCredentialHelperScriptArgument(t *testing.T) {
	for _, c := range []struct {
		name, relay string
		absent      bool
	}{
		{"gateway", "gateway", false},
		{"git", "git", false},
		{"gateway_absent_helper", "gateway", true},
		{"git_absent_helper", "git", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			repo(t, e.work)
			script := filepath.Join(e.work, "scripts", "token")
			cmd := "[/bin/sh, " + script + "]"
			if c.absent {
				cmd = "[" + script + "]" // the box makes it, executable
				os.MkdirAll(filepath.Dir(script), 0o755)
			} else {
				write(t, script, "echo key\n")
			}
			cfg := filepath.Join(e.root, "c", "agentbox", "config.yaml")
			b, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			extra := "gateway:\n  anthropic:\n    credential:\n      command: " + cmd + "\n"
			if c.relay == "git" {
				extra = "git:\n  allow: [git.example.org/team]\n  credentials:\n    - prefix: git.example.org/team\n      username: oauth2\n      command: " + cmd + "\n"
			}
			write(t, cfg, string(b)+extra)
			out, stderr, code := e.runAll("run", "true")
			all := out + stderr
			if code != 125 || !strings.Contains(all, "workspace_refused") {
				t.Fatalf("a launch on a workspace holding %s, the script the configured credential helper %s runs on the host (present at the launch: %v): exit %d, want 125 (refused)\n%s", script, cmd, !c.absent, code, all)
			}
			if !strings.Contains(all, script) {
				t.Errorf("the refusal does not name %s:\n%s", script, all)
			}
		})
	}
}
