package harnessstate

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCopilotConfig pins the allowlist of Copilot CLI's config.json: the carried state keys
// come through (the host's win), the workspace's trust comes from the host (the workspace, a
// folder in it or a folder holding it) or from the box (the workspace or a folder in it), and
// neither the plugins, the accounts and their tokens nor any other key survives, from either
// side. The host's file is written as Copilot writes it: comment lines, then JSON.
func TestCopilotConfig(t *testing.T) {
	const ws = "/home/u/work"
	host := `// User settings belong in settings.json.
// This file is managed automatically.
{
  "firstLaunchAt": "2026-01-01T00:00:00.000Z",
  "appTipShown": true,
  "recentModelIds": ["claude-sonnet-4.5"],
  "installedPlugins": [{"name": "evil", "marketplace": "m", "enabled": true}],
  "loggedInUsers": [{"host": "https://github.com", "login": "u"}],
  "copilotTokens": {"https://github.com:u": "gho_secret"},
  "staff": true,
  "trustedFolders": ["/home/u", "/home/u/other", "relative", "/home/u/work/../x"] /* a comment */
}
`
	box := `{
  "appTipShown": false,
  "sandboxOnboardingShown": true,
  "askedSetupTerminals": "vscode",
  "installedPlugins": [{"name": "planted"}],
  "trustedFolders": ["/home/u/work/sub", "/", "/home/u/work-evil", "/home/u/work//a"]
}`
	out, err := copilotConfig([]byte(host), []byte(box), ws)
	if err != nil {
		t.Fatal(err)
	}
	got, err := jsonc(out)
	if err != nil {
		t.Fatalf("the synthesized file does not read back: %v\n%s", err, out)
	}
	want := `{"appTipShown":true,"firstLaunchAt":"2026-01-01T00:00:00.000Z","recentModelIds":["claude-sonnet-4.5"],` +
		`"sandboxOnboardingShown":true,"trustedFolders":["/home/u","/home/u/work/sub"]}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("synthesized:\n%s\nwant:\n%s", b, want)
	}
	if !strings.HasPrefix(string(out), "// ") {
		t.Errorf("no comment saying who wrote it:\n%s", out)
	}
	// Garbage on both sides: an empty state, which Copilot takes as a new user's.
	out, _ = copilotConfig([]byte("{"), []byte("/* x"), ws)
	if got, err := jsonc(out); err != nil || len(got) != 0 {
		t.Errorf("from garbage: %s (%v)", out, err)
	}
	for _, bad := range []string{"{", "[1]", "null", "/* open", `{"a": 1} // fine`} {
		_, err := jsonc([]byte(bad))
		if (err == nil) != (bad == `{"a": 1} // fine`) {
			t.Errorf("jsonc(%q): %v", bad, err)
		}
	}
	if m, err := jsonc([]byte(`{"u": "http://x/*y*/ // z"}`)); err != nil || m["u"] != "http://x/*y*/ // z" {
		t.Errorf("a string holding comment markers: %v, %v", m, err)
	}
}

// TestCopilotConfigShown: a tip shown and a terminal asked about in a box hold in the next box
// although the host's config.json has the older value (copilotShown); the rest stays the host's.
func TestCopilotConfigShown(t *testing.T) {
	host := `{"appTipShown": false, "askedSetupTerminals": ["xterm"], "firstLaunchAt": "2026-01-01T00:00:00Z"}`
	box := `{"appTipShown": true, "askedSetupTerminals": ["tmux", "xterm"], "firstLaunchAt": "2026-12-01T00:00:00Z"}`
	out, err := copilotConfig([]byte(host), []byte(box), "/w")
	if err != nil {
		t.Fatal(err)
	}
	got, err := jsonc(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	b, _ := json.Marshal(got)
	if want := `{"appTipShown":true,"askedSetupTerminals":["xterm","tmux"],"firstLaunchAt":"2026-01-01T00:00:00Z"}`; string(b) != want {
		t.Errorf("synthesized %s, want %s", b, want)
	}
}
