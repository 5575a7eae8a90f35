//go:build linux

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
)

// TestAttackUnparsedCredentialHelperRunsBoxScript (review 19b, end to end): fix19a refuses a
// workspace holding a path a credential helper's arguments name, but config.CommandPaths sees
// only paths written absolute or beginning ~/ or $HOME/. The helper here runs the workspace's
// scripts/token (present at the launch, printing the key) named as the relay, which runs it in
// "/" with the daemon's $HOME, reaches it: relative to "/" ([/bin/sh, WS-without-its-slash/...];
// docs/security.md: "a relative path names nothing a box writes"), or with "$HOME" quoted
// apart ([/bin/sh, -c, 'sh "$HOME"/REL/scripts/token']). The launch is accepted; the box rewrites
// scripts/token and sends one request through the relay with its pairing; the relay runs the
// box's script on the host, unboxed, as the user (it leaves a file outside the workspace).
func TestAttackUnparsedCredentialHelperRunsBoxScript(t *testing.T) {
	if _, err := os.Stat("/usr/bin/curl"); err != nil {
		t.Fatal("curl is not installed: the test needs /usr/bin/curl")
	}
	for _, c := range []string{"relative_from_root", "quoted_home"} {
		t.Run(c, func(t *testing.T) {
			e := NewEnv(t)
			up := llmtest.NewAnthropic(llmtest.Options{Credential: hostCredential})
			t.Cleanup(up.Close)
			helper := filepath.Join(e.Work, "scripts", "token")
			if err := os.MkdirAll(filepath.Dir(helper), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(helper, []byte("echo "+hostCredential+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := "[/bin/sh, " + strings.TrimPrefix(helper, "/") + "]"
			if c == "quoted_home" {
				rel, err := filepath.Rel(e.Home, helper)
				if err != nil {
					t.Fatal(err)
				}
				cmd = `[/bin/sh, -c, 'sh "$HOME"/` + rel + `']`
			}
			marker := filepath.Join(e.Root, "ran-on-the-host")
			writeConfig(t, e, fmt.Sprintf("gateway:\n  anthropic:\n    url: %s\n    credential:\n      command: %s\n", up.URL, cmd))
			script := fmt.Sprintf("printf 'id > %s\\necho %s\\n' > %q && ", marker, hostCredential, helper) +
				curlRelay(`-H "x-api-key: $AGENTBOX_PAIRING"`)
			r := e.Box(script)
			t.Logf("helper %s; box: exit %d\n%s\n%s", cmd, r.Code, r.Stdout, r.Stderr)
			if b, err := os.ReadFile(marker); err == nil {
				t.Fatalf("the relay ran the box's %s on the host, unboxed (helper %s): it wrote %s (%q)", helper, cmd, marker, b)
			}
			if all := r.Stdout + r.Stderr; r.Code != 125 || !strings.Contains(all, "workspace_refused") {
				t.Errorf("the launch was not refused (exit %d), though the helper %s runs %s", r.Code, cmd, helper)
			}
		})
	}
}
