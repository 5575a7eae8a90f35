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

// TestBoxNamesStayOnOneLine (review 10, F8 and F4): a name the box chose is printed on one line,
// every control written out. A file named "ok.yml\n@@ -0,0 +1,1 @@\n+harmless" forged header and
// diff lines in `agentbox changes`; a folder named with OSC 52 (set the clipboard), a screen
// clear and a carriage return reached the terminal raw from the drift lines of `agentbox
// launches`.
func TestBoxNamesStayOnOneLine(t *testing.T) {
	forged := ".github/workflows/ok.yml\n@@ -0,0 +1,1 @@\n+harmless"
	cs := &api.Changes{LaunchID: strings.Repeat("a", 32), Workspace: "/w", Changes: []api.ProposedChange{
		{Path: forged, Diff: "--- /dev/null\n+++ b/.github/workflows/ok.yml\\x0a@@ -0,0 +1,1 @@\\x0a+harmless\n@@ -0,0 +1,1 @@\n+x\n"},
	}, Dropped: 3, DroppedPaths: []string{"a\nb"}}
	var b bytes.Buffer
	printChanges(&b, cs)
	out := b.String()
	if strings.Contains(out, "\n+harmless") || strings.Contains(out, "\n@@ -0,0 +1,1 @@\n+harmless") || strings.Contains(out, "a\nb") {
		t.Errorf("a box-chosen name forged lines:\n%s", out)
	}
	if !strings.Contains(out, `ok.yml\x0a@@ -0,0 +1,1 @@\x0a+harmless (holds control characters`) || !strings.Contains(out, "3 more files") {
		t.Errorf("the output lacks the escaped name or the files not kept:\n%s", out)
	}

	osc := "/w/x\x1b]52;c;cHduZWQ=\x07\x1b[2J\rok/.vscode/tasks.json"
	ls := []api.Launch{{ID: strings.Repeat("b", 32), Workspace: "/w", Drift: true, DriftEvents: []api.DriftEvent{
		{Kind: "created", Path: osc, Detail: "created " + osc, Alert: true, Source: "watch"},
	}}}
	b.Reset()
	printDrift(&b, ls)
	out = b.String()
	for _, bad := range []string{"\x1b", "\x07", "\r"} {
		if strings.Contains(out, bad) {
			t.Errorf("launches' drift lines hold the raw control %q:\n%q", bad, out)
		}
	}
	if strings.Count(out, `x\x1b]52;c;cHduZWQ=\x07\x1b[2J\x0dok/.vscode/tasks.json`) != 2 {
		t.Errorf("the drift lines lack the escaped path and detail:\n%s", out)
	}
}

// TestChangesIgnoredFiles: the files a launch left in git-ignored places are counted apart from
// the changes to protected configuration, each is marked, and those removed past the bound are
// said with their names written out on one line.
func TestChangesIgnoredFiles(t *testing.T) {
	cs := &api.Changes{LaunchID: strings.Repeat("a", 32), Workspace: "/w", Changes: []api.ProposedChange{
		{Path: ".mcp.json", Diff: "+{}\n"},
		{Path: "bin/x", Ignored: true, Diff: "(binary)\n"},
		{Path: "build/app", Ignored: true, HostExists: true, Conflict: true, Diff: "(binary)\n"},
	}, IgnoredDropped: 2, IgnoredDroppedPaths: []string{"build/big\n1", "build/big2"}}
	var b bytes.Buffer
	printChanges(&b, cs)
	out := b.String()
	for _, want := range []string{
		"proposed 1 change to protected configuration in /w, and left 2 files in git-ignored places, moved out of the workspace:",
		"\nbin/x (left in a git-ignored place: moved out of the workspace; apply puts it back)\n",
		"\nbuild/app (left in a git-ignored place: moved out of the workspace; apply puts it back) (the host has this path now: apply refuses it)\n",
		`2 more files the launch left in git-ignored places were removed from the workspace and not kept: past the bound of what is kept (build/big\x0a1, build/big2)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

// TestChangesOfRunningLaunch: what a launch proposes while it still runs can change before it
// ends (the box writes the path again), and apply refuses until then: `agentbox changes` says
// so and offers no apply line (review 32, B F4: the change shown while the box ran was not
// the one applied after it ended).
func TestChangesOfRunningLaunch(t *testing.T) {
	cs := &api.Changes{LaunchID: "0123456789abcdef", Workspace: "/w", Running: true,
		Changes: []api.ProposedChange{{Path: ".envrc", Diff: "+export SAFE=1\n"}}}
	var b strings.Builder
	printChanges(&b, cs)
	out := b.String()
	if !strings.Contains(out, "proposed 1 change to") || !strings.Contains(out, "the launch is still running") || strings.Contains(out, "apply with") {
		t.Errorf("changes of a running launch:\n%s", out)
	}
	cs.Running = false
	b.Reset()
	printChanges(&b, cs)
	if out := b.String(); strings.Contains(out, "still running") || !strings.Contains(out, "apply with: agentbox apply 0123456789ab") {
		t.Errorf("changes of an ended launch:\n%s", out)
	}
}
