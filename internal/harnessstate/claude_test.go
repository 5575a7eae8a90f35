package harnessstate

import (
	"encoding/json"
	"testing"
)

// TestClaudeConfig pins the allowlist: carried keys come through (the host's win), onboarding
// is done, the workspace's trust comes from the host (the workspace or a folder holding it) or
// from the box (the workspace or a folder in it), and nothing that can run code or carries a
// credential survives, from either side.
func TestClaudeConfig(t *testing.T) {
	const ws = "/home/u/work"
	mcp := map[string]any{"evil": map[string]any{"command": "sh", "args": []string{"-c", "id"}}}
	host := map[string]any{
		"theme": "light", "numStartups": 7, "editorMode": "vim", "firstStartVersion": "2.1.334",
		"mcpServers": mcp, "primaryApiKey": "sk-secret", "oauthAccount": map[string]any{"emailAddress": "u@example.org"},
		"customApiKeyResponses": map[string]any{"approved": []string{"x"}},
		"env":                   map[string]any{"LD_PRELOAD": "/tmp/x.so"}, "apiKeyHelper": "echo k",
		"projects": map[string]any{
			"/home/u":       map[string]any{"hasTrustDialogAccepted": true, "mcpServers": mcp, "allowedTools": []string{"Bash"}},
			"/home/u/other": map[string]any{"hasTrustDialogAccepted": true},
		},
	}
	box := map[string]any{
		"theme": "dark", "fullscreenUpsellSeenCount": 3, "verbose": "yes", // wrong type: dropped
		// A one-time dialog answered in a box, by the box's id: asked no more in later boxes.
		"userID": "b0x", "lowerAutoWindowAskedOf": []string{"b0x"}, "lowerAutoWindowToldTo": "b0x", // wrong type: dropped
		"mcpServers": mcp, "hooks": map[string]any{"Stop": "x"},
		"projects": map[string]any{
			ws + "/sub":  map[string]any{"hasTrustDialogAccepted": true, "enabledMcpjsonServers": []string{"a"}},
			"/":          map[string]any{"hasTrustDialogAccepted": true}, // outside the workspace: a box cannot trust it
			ws + "-evil": map[string]any{"hasTrustDialogAccepted": true},
		},
	}
	hb, _ := json.Marshal(host)
	bb, _ := json.Marshal(box)
	out, err := claudeConfig(hb, bb, ws)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"editorMode":"vim","firstStartVersion":"2.1.334","fullscreenUpsellSeenCount":3,"hasCompletedOnboarding":true,"lowerAutoWindowAskedOf":["b0x"],"numStartups":7,` +
		`"projects":{"/home/u":{"hasTrustDialogAccepted":true},"/home/u/work/sub":{"hasTrustDialogAccepted":true}},"theme":"light","userID":"b0x"}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("synthesized:\n%s\nwant:\n%s", b, want)
	}
	// Garbage on both sides still gives a config that skips the first-run path.
	out, _ = claudeConfig([]byte("{"), []byte("[1]"), ws)
	if string(out) != "{\n  \"hasCompletedOnboarding\": true\n}" {
		t.Errorf("from garbage: %s", out)
	}
}

// TestClaudeConfigShown: for what Claude Code records it has shown (release notes, counters,
// one-time notices and dialogs), the furthest along of the host's and the box's values is
// carried, so that a box does not show again what an earlier box of the workspace showed; a
// preference stays the host's, and a value that is no version leaves the host's.
func TestClaudeConfigShown(t *testing.T) {
	host := map[string]any{
		"lastReleaseNotesSeen": "2.1.333", "lastOnboardingVersion": "2.1.340", "numStartups": 12,
		"tipsHistory": map[string]any{"a": 3, "b": 9}, "hasSeenAutoDefaultNotice": false,
		"lowerAutoWindowAskedOf": []string{"h0st"}, "theme": "light", "migrationVersion": 15,
		"fullscreenUpsellSeenCount": 1,
	}
	box := map[string]any{
		"lastReleaseNotesSeen": "2.1.335", "lastOnboardingVersion": "2.1.40", "numStartups": 14,
		"tipsHistory": map[string]any{"a": 5, "c": 1}, "hasSeenAutoDefaultNotice": true,
		"lowerAutoWindowAskedOf": []string{"b0x", "h0st"}, "theme": "dark", "migrationVersion": 16,
		"fullscreenUpsellSeenCount": "3", // wrong type: dropped, the host's kept
	}
	hb, _ := json.Marshal(host)
	bb, _ := json.Marshal(box)
	out, err := claudeConfig(hb, bb, "/w")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	json.Unmarshal(out, &got)
	want := `{"fullscreenUpsellSeenCount":1,"hasCompletedOnboarding":true,"hasSeenAutoDefaultNotice":true,"lastOnboardingVersion":"2.1.340","lastReleaseNotesSeen":"2.1.335",` +
		`"lowerAutoWindowAskedOf":["h0st","b0x"],"migrationVersion":15,"numStartups":14,"theme":"light","tipsHistory":{"a":5,"b":9,"c":1}}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("synthesized:\n%s\nwant:\n%s", b, want)
	}
	for _, c := range []struct{ box, host, want string }{
		{"2.1.335", "2.1.333", "2.1.335"},
		{"2.1.333", "2.1.335", "2.1.335"},
		{"2.2", "2.1.999", "2.2"},
		{"2.1.335.1", "2.1.335", "2.1.335.1"},
		{"9.9.9-evil", "2.1.333", "2.1.333"},
		{"2.1.333", "", ""},
		{"", "2.1.333", "2.1.333"},
	} {
		if got := laterVersion(c.box, c.host); got != c.want {
			t.Errorf("laterVersion(box %q, host %q) = %q, want %q", c.box, c.host, got, c.want)
		}
	}
}
