package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

// TestChangesShowControlCharacters: a box that ends a planted line of .git/config with a
// carriage return and "cursor up, erase" sequences must not make the diff the user reviews
// before `agentbox apply` look clean on a terminal: every control character is written out, the
// planted lines stay, and the header says the change holds control characters. Without the
// escaping the raw ESC and CR reach the terminal and erase the [core] and fsmonitor lines.
func TestChangesShowControlCharacters(t *testing.T) {
	planted := "+[core]\n+\tfsmonitor = \"touch /tmp/pwned; false\"\n+# \r\x1b[2A\x1b[J\n"
	cs := &api.Changes{LaunchID: strings.Repeat("a", 32), Workspace: "/w", Changes: []api.ProposedChange{
		{Path: ".git/config", Modifies: true, Diff: planted},
		{Path: ".github/workflows/ci.yml\r\x1b[2K", Diff: "+x\n"},
		{Path: ".envrc", Diff: "+echo ok # \u202e\u2066hidden\xff\n"},
	}}
	var b bytes.Buffer
	printChanges(&b, cs)
	out := b.String()
	for _, bad := range []string{"\x1b", "\r", "\u202e", "\u2066", "\xff"} {
		if strings.Contains(out, bad) {
			t.Errorf("the output holds the raw control %q:\n%q", bad, out)
		}
	}
	for _, want := range []string{"fsmonitor", `\x0d\x1b[2A\x1b[J`, `ci.yml\x0d\x1b[2K`, `\u{202e}\u{2066}hidden\xff`, "holds control characters"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "holds control characters"); n != 3 {
		t.Errorf("%d changes marked as holding control characters, want 3:\n%s", n, out)
	}
	// Ordinary text, tabs and newlines pass unchanged.
	if v, esc := visible("a\tb\nc ü ✓"); esc || v != "a\tb\nc ü ✓" {
		t.Errorf("visible(plain) = %q, %v", v, esc)
	}
}
