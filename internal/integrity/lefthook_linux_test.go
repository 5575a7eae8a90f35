package integrity

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLefthookNamedPaths: what lefthook's pinned configuration names, which lefthook reads at
// each hook run, is protected: the files of extends (a path, a glob's matches, what an
// extended file extends in turn, an absent one guarded; a glob's later matches are the
// launch's nested configuration, anchored at the top), the script folders source_dir and
// source_dir_local (absent: guarded as a folder), named in YAML or TOML, the folder its remotes
// are cloned into (in the common dir) and .config/lefthook/. A path outside the workspace is the
// user's.
func TestLefthookNamedPaths(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, "lefthook.yml"), "extends:\n  - ci/extra.yml\n  - \"hooks/*.yml\"\n  - /etc/lefthook.yml\nsource_dir: tools/hooks/\nremotes:\n  - git_url: https://git.example.org/org/shared.git\n    ref: v1\npre-commit:\n  scripts:\n    check.sh:\n      runner: sh\n")
	mustWrite(t, filepath.Join(ws, "ci/extra.yml"), "extends: ci/more.yml\n")
	mustWrite(t, filepath.Join(ws, "hooks/a.yml"), "pre-push:\n  commands: {}\n")
	mustWrite(t, filepath.Join(ws, "tools/hooks/pre-commit/check.sh"), "make check\n")
	mustWrite(t, filepath.Join(ws, ".lefthook-local.toml"), "source_dir_local = \"tools/local\"\nextends = [\"ci/local.toml\"]\n")
	lay := resolveWS(t, ws)
	wantPinned(t, lay, "lefthook.yml", "ci/extra.yml", "ci/more.yml", "hooks/a.yml", "tools/hooks", "tools/local", "ci/local.toml",
		".git/info/lefthook-remotes", ".config/lefthook", ".config/lefthook-local")
	dirs := map[string]bool{}
	for _, g := range lay.Guards {
		rel, _ := filepath.Rel(ws, g.Path)
		dirs[rel] = g.Dir
	}
	for _, d := range []string{"tools/local", ".git/info/lefthook-remotes", ".config/lefthook"} {
		if !dirs[d] {
			t.Errorf("the absent %s is not guarded as a folder", d)
		}
	}
	if len(lay.Notes) > 0 {
		t.Errorf("notes %q", lay.Notes)
	}
	if pinnedRels(lay)["../etc/lefthook.yml"] {
		t.Errorf("a file outside the workspace was pinned")
	}
	// The pattern's later matches: looked for by the scan at the top's hooks/, nowhere else.
	files := nestedFiles(lay.Config)
	if nestedConfig(files, "hooks", "b.yml", nil) == "" {
		t.Errorf("a later match of hooks/*.yml is not nested configuration: %+v", lay.Config)
	}
	for _, c := range [][2]string{{"sub/hooks", "b.yml"}, {"hooks", "b.json"}, {".", "b.yml"}} {
		if r := nestedConfig(files, c[0], c[1], nil); strings.Contains(r, "extends pattern") {
			t.Errorf("%s/%s taken for a match of hooks/*.yml", c[0], c[1])
		}
	}
	if nestedConfigFolder(files, "hooks", nil) != "" {
		t.Errorf("the pattern's folder taken for a configuration folder")
	}
}

// TestLefthookJSONCNamedPaths (protect10): lefthook reads a .jsonc configuration with its
// comments and trailing commas blanked (its config/jsonc_parser.go, tidwall/jsonc). Before, such
// a file was read as YAML, which refuses a comment: a launch note said it could not be read,
// and the files its extends and source_dir name were not pinned. A remote's .jsonc config is
// read too, as lefthook merges it.
func TestLefthookJSONCNamedPaths(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, "lefthook.jsonc"), `{
  // Shared checks live in ci/.
  "extends": ["ci/extra.jsonc", /* and the team's */ "ci/team.yml",],
  "source_dir": "tools/hooks/",
  "remotes": [{"git_url": "https://git.example.org/org/shared.git", "ref": "v1"}],
  "pre-commit": {"scripts": {"check.sh": {"runner": "sh"}}},
}
`)
	mustWrite(t, filepath.Join(ws, "ci/extra.jsonc"), "{\n  // more\n  \"extends\": [\"ci/more.jsonc\"],\n}\n")
	mustWrite(t, filepath.Join(ws, ".git/info/lefthook-remotes/shared-v1/lefthook.jsonc"), "{\"extends\": [\""+filepath.Join(ws, "ci/remote.yml")+"\"], // the remote's\n}\n")
	lay := resolveWS(t, ws)
	wantPinned(t, lay, "lefthook.jsonc", "ci/extra.jsonc", "ci/more.jsonc", "ci/team.yml", "tools/hooks", "ci/remote.yml")
	if len(lay.Notes) > 0 {
		t.Errorf("notes %q", lay.Notes)
	}
}
