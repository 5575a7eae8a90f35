package integrity

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestEventRules: only an ordinary file's event in an ordinary folder is inert; every name
// and folder a targeted rescan reads for itself calls for the rescan, as before.
func TestEventRules(t *testing.T) {
	ws := "/w"
	s := &State{Workspace: ws, PathDirs: map[string]uint64{"bin": 1},
		Config: []NestedConfigFile{
			{Name: "opencode.json", Reads: "a profile's workspace configuration"},
			{Dir: "tools", Name: "*.cfg", Reads: "a tool's"},
			{Dir: "/ci/*", Name: "lefthook.yml", Reads: "lefthook extends"},
			{Dir: "agentcfg", Reads: "every file of a profile's workspace folder"},
		},
		Roots: []RootState{{Root: Root{Path: "/w/notes/keep.txt"}}, {Root: Root{Path: "/w/locked"}}},
	}
	r := s.eventRules()
	for _, c := range []struct {
		dir, name string
		inert     bool
	}{
		{"/w", "notes.txt", true},
		{"/w/src/pkg", "main.go", true},
		{"/w/d7", "f123.txt", true},
		{"/w/node_modules/left-pad", "index.js", true},
		{"/w/ci/lint", "other.yml", true},
		// names
		{"/w", ".envrc", false},
		{"/w/d7", ".mcp.json", false},
		{"/w/d7", ".gitignore", false},
		{"/w/d7", "", false},
		{"/w/d7", "HEAD", false},
		{"/w/d7", "config", false},
		{"/w/d7", "package.json", false},
		{"/w/d7", "x.py", false},
		{"/w/d7", "x.cpython-312-x86_64-linux-gnu.so", false},
		{"/w/d7", "x.pyc", false},
		{"/w/d7", "evil.pth", false},
		{"/w/d7", "proj.code-workspace", false},
		{"/w/d7", "go.work", false},
		{"/w/d7", "gradle.properties", false},
		{"/w/d7", "rust-toolchain", false},
		{"/w/sub", "opencode.json", false},
		{"/w/tools", "x.cfg", false},
		{"/w/ci/lint", "lefthook.yml", false},
		{"/w/vendor", "modules.txt", false},
		{"/w/d7", "agentcfg", false}, // a link where a configuration folder goes
		// folders
		{"/w/.claude", "notes.txt", false},
		{"/w/.claude/commands", "x.md", false},
		{"/w/a/.vscode", "x.txt", false},
		{"/w/bin", "tool", false},
		{"/w/bin/sub", "tool", false},
		{"/w/repo.git/hooks", "pre-commit", false},
		{"/w/repo.git/refs/heads", "main", false},
		{"/w/repo.git/objects/ab", "cdef", false},
		{"/w/vendor", "x.txt", false},
		{"/w/agentcfg", "x.txt", false},
		{"/w/x/agentcfg/y", "x.txt", false},
		{"/elsewhere", "x.txt", false},
		{"/w/..", "x.txt", false},
		// roots
		{"/w/notes", "keep.txt", false},
		{"/w/locked", "x.txt", false},
	} {
		if got := r.inert(c.dir, c.name); got != c.inert {
			t.Errorf("inert(%s, %q) = %v, want %v", c.dir, c.name, got, c.inert)
		}
		// Asked again (the folder's rules kept): the same answer.
		if got := r.inert(c.dir, c.name); got != c.inert {
			t.Errorf("inert(%s, %q) asked again = %v, want %v", c.dir, c.name, got, c.inert)
		}
	}
	// The top on PATH (PATH_add .): no event of any folder is inert.
	s.PathDirs = map[string]uint64{".": 1}
	if r := s.eventRules(); r.inert("/w/d7", "f.txt") || r.inert("/w", "notes.txt") {
		t.Error("with the top on PATH, an event was inert")
	}
}

// TestEventRulesRepositoryTop: a repository's top is never inert, nor a folder that becomes
// one (its .git's event makes its rules read again).
func TestEventRulesRepositoryTop(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"repo/.git", "plain"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := (&State{Workspace: ws}).eventRules()
	if r.inert(filepath.Join(ws, "repo"), "notes.txt") {
		t.Error("a repository's top: inert")
	}
	if r.inert(ws, "notes.txt") != true || !r.inert(filepath.Join(ws, "plain"), "notes.txt") {
		t.Error("an ordinary folder: not inert")
	}
	if err := os.Mkdir(filepath.Join(ws, "plain", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r.inert(filepath.Join(ws, "plain"), ".git") || r.inert(filepath.Join(ws, "plain"), "notes.txt") {
		t.Error("a folder that became a repository's top: still inert")
	}
}

// TestEventRulesForget: forget drops what was read of a folder and of those beneath it, not of
// its siblings; past forgetScanMax folders read it drops them all.
func TestEventRulesForget(t *testing.T) {
	r := (&State{Workspace: "/w"}).eventRules()
	for _, d := range []string{"/w/a", "/w/a/b", "/w/a/b/c", "/w/ab", "/w/z"} {
		r.inert(d, "f.txt")
	}
	r.forget("/w/a")
	for d, want := range map[string]bool{"/w/a": false, "/w/a/b": false, "/w/a/b/c": false, "/w/ab": true, "/w/z": true} {
		if _, ok := r.folders[d]; ok != want {
			t.Errorf("after forget(/w/a), %s read: %v, want %v", d, ok, want)
		}
	}
	for i := range forgetScanMax + 2 {
		r.inert(filepath.Join("/w/many", strconv.Itoa(i)), "f.txt")
	}
	r.forget("/w/many/0")
	if len(r.folders) != 0 {
		t.Errorf("past %d folders read, forget left %d", forgetScanMax, len(r.folders))
	}
	if !r.inert("/w/z", "f.txt") {
		t.Error("a folder dropped is not read again")
	}
}
