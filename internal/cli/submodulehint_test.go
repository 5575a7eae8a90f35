package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

// TestChangesSubmoduleInitHint: `git submodule update --init` in a box clones into
// .git/modules, but the submodule's new git file is taken by box-init's guard, and it and the
// .git/config lines are proposed changes. agentbox changes says so beside the git file, and
// what to run on the host instead (naming the clone the host's git will use when it is
// there); not for a git file pointing elsewhere, or a changed file.
func TestChangesSubmoduleInitHint(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git", "modules", "present"), 0o755); err != nil {
		t.Fatal(err)
	}
	cs := &api.Changes{LaunchID: strings.Repeat("a", 32), Workspace: ws, Changes: []api.ProposedChange{
		{Path: "libs/sub/.git", Diff: "--- /dev/null\n+++ b/libs/sub/.git\n@@ -0,0 +1,1 @@\n+gitdir: ../../.git/modules/libs/sub\n"},
		{Path: "present/.git", Diff: "+gitdir: ../.git/modules/present\n"},
		{Path: "other/.git", Diff: "+gitdir: /elsewhere/x\n"},
		{Path: "abs/.git", Diff: "+gitdir: " + ws + "/.git/modules/abs\n"},
		{Path: "mod/.git", Modifies: true, Diff: "+gitdir: ../.git/modules/mod\n"},
	}}
	var b bytes.Buffer
	printChanges(&b, cs)
	out := b.String()
	if n := strings.Count(out, "run git submodule update --init on the host"); n != 3 {
		t.Errorf("%d changes carry the submodule hint, want 3 (libs/sub, present, abs):\n%s", n, out)
	}
	if n := strings.Count(out, "which uses what the box cloned into"); n != 1 {
		t.Errorf("%d changes name a clone, want 1 (present):\n%s", n, out)
	}
	for _, want := range []string{"libs/sub/.git (a submodule's git file", "present/.git (a submodule's git file",
		"which uses what the box cloned into .git/modules/present (checked at its exit)", "abs/.git (a submodule's git file"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}
