package integrity

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLefthookNamedPaths: what lefthook's pinned configuration names, which lefthook reads at
// each hook run, is protected: the files of extends (a path, a glob's matches, what an
// extended file extends in turn, an absent one guarded) and the script folders source_dir and
// source_dir_local (absent: guarded as a folder). A path outside the workspace is the user's.
// A TOML config is not read, and a launch note says so.
func TestLefthookNamedPaths(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, "lefthook.yml"), "extends:\n  - ci/extra.yml\n  - \"hooks/*.yml\"\n  - /etc/lefthook.yml\nsource_dir: tools/hooks/\nsource_dir_local: tools/local\npre-commit:\n  scripts:\n    check.sh:\n      runner: sh\n")
	mustWrite(t, filepath.Join(ws, "ci/extra.yml"), "extends: ci/more.yml\n")
	mustWrite(t, filepath.Join(ws, "hooks/a.yml"), "pre-push:\n  commands: {}\n")
	mustWrite(t, filepath.Join(ws, "tools/hooks/pre-commit/check.sh"), "make check\n")
	mustWrite(t, filepath.Join(ws, ".lefthook-local.toml"), "source_dir_local = \"x\"\n")
	lay := resolveWS(t, ws)
	wantPinned(t, lay, "lefthook.yml", "ci/extra.yml", "ci/more.yml", "hooks/a.yml", "tools/hooks", "tools/local")
	for _, g := range lay.Guards {
		if rel, _ := filepath.Rel(ws, g.Path); rel == "tools/local" && !g.Dir {
			t.Errorf("the absent source_dir_local is guarded as a file, not a folder")
		}
	}
	notes := strings.Join(lay.Notes, "\n")
	for _, want := range []string{".lefthook-local.toml is not read", `extends names "hooks/*.yml", a pattern`} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q, want one saying %q", notes, want)
		}
	}
	if pinnedRels(lay)["../etc/lefthook.yml"] || strings.Contains(notes, "/etc/lefthook.yml") {
		t.Errorf("a file outside the workspace was pinned or noted: %q", notes)
	}
}
