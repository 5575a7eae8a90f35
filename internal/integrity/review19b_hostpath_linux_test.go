package integrity_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackCredentialHelperPathUnparsed (review 19b): fix19a refuses a workspace holding a
// path a credential helper's arguments name (config.CommandPaths, plan.CheckHostFiles), but
// only a path written absolute, or starting ~/ or $HOME/, is seen (config's
// TestAttackCommandPathsMissed has the parser's misses). Two ordinary ways to name the
// workspace's scripts/token, both run by the relay (in "/", with the daemon's $HOME) on the
// host: the path relative to "/" ([/bin/sh, WS-without-its-slash/scripts/token]: security.md
// says "a relative path names nothing a box writes"), and "$HOME" quoted apart from the rest
// ([/bin/sh, -c, 'sh "$HOME"/../WSNAME/scripts/token'], the workspace beside the test's home).
// The launch is accepted (exit 0), so the box may rewrite scripts/token, which the relay runs
// at its first request. Want: refused (125), as TestAttackCredentialHelperScriptArgument's
// [/bin/sh, WS/scripts/token] is.
func TestAttackCredentialHelperPathUnparsed(t *testing.T) {
	for _, c := range []string{"relative_from_root", "quoted_home"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			repo(t, e.work)
			script := filepath.Join(e.work, "scripts", "token")
			write(t, script, "echo key\n")
			rel, err := filepath.Rel(filepath.Dir(e.home), e.work)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Fatalf("the workspace %s is not beside the home %s", e.work, e.home)
			}
			cmd := "[/bin/sh, " + strings.TrimPrefix(script, "/") + "]"
			if c == "quoted_home" {
				cmd = `[/bin/sh, -c, 'sh "$HOME"/../` + rel + `/scripts/token']`
			}
			cfg := filepath.Join(e.root, "c", "agentbox", "config.yaml")
			b, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			write(t, cfg, string(b)+"gateway:\n  anthropic:\n    credential:\n      command: "+cmd+"\n")
			out, stderr, code := e.runAll("run", "true")
			if all := out + stderr; code != 125 || !strings.Contains(all, "workspace_refused") {
				t.Fatalf("a launch on a workspace holding %s, which the configured credential helper %s runs on the host (in /, HOME=%s): exit %d, want 125 (refused)\n%s", script, cmd, e.home, code, all)
			}
		})
	}
}
