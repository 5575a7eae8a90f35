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
// what to run on the host instead (naming the git directory the host's git will use when one
// is there, which the box may have made); only for a git file where .gitmodules puts a
// submodule, naming that submodule's own git directory (review 31b: a box could have the hint
// name another folder), never for a changed file.
func TestChangesSubmoduleInitHint(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git", "modules", "present"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitmodules := "[submodule \"libs/sub\"]\n\tpath = libs/sub\n\turl = ../sub.git\n[submodule \"present\"]\n\tpath = present\n" +
		"[submodule \"abs\"]\n\tpath = abs\n[submodule \"decoy\"]\n\tpath = decoy\n[submodule \"mod\"]\n\tpath = mod\n"
	if err := os.WriteFile(filepath.Join(ws, ".gitmodules"), []byte(gitmodules), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := &api.Changes{LaunchID: strings.Repeat("a", 32), Workspace: ws, Changes: []api.ProposedChange{
		{Path: "libs/sub/.git", Diff: "--- /dev/null\n+++ b/libs/sub/.git\n@@ -0,0 +1,1 @@\n+gitdir: ../../.git/modules/libs/sub\n"},
		{Path: "present/.git", Diff: "+gitdir: ../.git/modules/present\n"},
		{Path: "other/.git", Diff: "+gitdir: ../.git/modules/other\n"},   // no submodule there
		{Path: "decoy/.git", Diff: "+gitdir: ../.git/modules/present\n"}, // another submodule's git directory
		{Path: "abs/.git", Diff: "+gitdir: " + ws + "/.git/modules/abs\n"},
		{Path: "mod/.git", Modifies: true, Diff: "+gitdir: ../.git/modules/mod\n"}, // a change, not a new file
	}}
	var b bytes.Buffer
	printChanges(&b, cs)
	out := b.String()
	if n := strings.Count(out, "run git submodule update --init on the host"); n != 3 {
		t.Errorf("%d changes carry the submodule hint, want 3 (libs/sub, present, abs):\n%s", n, out)
	}
	if n := strings.Count(out, "that is there now"); n != 1 {
		t.Errorf("%d changes name a git directory there, want 1 (present):\n%s", n, out)
	}
	for _, want := range []string{"libs/sub/.git (a submodule's git file", "present/.git (a submodule's git file",
		"it uses the git directory .git/modules/present that is there now, which the box may have made", "abs/.git (a submodule's git file"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}
