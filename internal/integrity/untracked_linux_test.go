package integrity

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUntrackedUnlisted (review 16, F5): the untracked files the launch created or changed
// that the user's git status does not name are listed, and only those: a file added to an
// untracked folder git status shows as one line (one the user had, one the box made), every
// new untracked file where status.showUntrackedFiles=no, none where it is all. Not listed: an
// untracked file git status names, the host's untracked file untouched since the snapshot,
// ignored files (the ignored-places rule's), the dependency folders.
func TestUntrackedUnlisted(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws := t.TempDir()
	gitIn := func(args ...string) {
		t.Helper()
		c := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		c.Dir = ws
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	put := func(rel string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(rel+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &State{Workspace: ws, Deps: map[string]DepFolder{filepath.Join(ws, "scratch", "node_modules"): {}}}
	// Not a repository yet: nothing, no error.
	s.Started = time.Now()
	if res, err := s.UntrackedUnlisted(context.Background()); err != nil || len(res.Files) != 0 {
		t.Fatalf("no repository: %+v %v", res, err)
	}
	gitIn("init", "-q")
	put(".gitignore")
	os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("build/\n"), 0o644)
	put("src.go")
	gitIn("add", "-A")
	gitIn("commit", "-qm", "init")
	put("scratch/notes.txt") // the user's, untracked, before the launch
	// The launch begins after the host's files were written (a ctime counts from ctimeLag
	// before it).
	s.Started = time.Now().Add(2 * ctimeLag)
	time.Sleep(3 * ctimeLag)
	for _, rel := range []string{"scratch/scratch_test.go", "scratch/deep/x.go", "newdir/a.go", "new.go", "build/out", "scratch/node_modules/m.js"} {
		put(rel)
	}
	list := func() (string, string) {
		t.Helper()
		res, err := s.UntrackedUnlisted(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(res.Files, " "), res.Why
	}
	if got, why := list(); got != "newdir/a.go scratch/deep/x.go scratch/scratch_test.go" || !strings.Contains(why, "newdir/, scratch/") {
		t.Errorf("default mode: %q (%s), want the files in the untracked folders only", got, why)
	}
	gitIn("config", "status.showUntrackedFiles", "no")
	if got, why := list(); got != "new.go newdir/a.go scratch/deep/x.go scratch/scratch_test.go" || !strings.Contains(why, "showUntrackedFiles=no") {
		t.Errorf("showUntrackedFiles=no: %q (%s), want every untracked file of the launch", got, why)
	}
	gitIn("config", "status.showUntrackedFiles", "all")
	if got, why := list(); got != "" || why != "" {
		t.Errorf("showUntrackedFiles=all: %q (%s), want none: git status names each", got, why)
	}
}

// TestHiddenSubmodules (review 17, F9): the submodules whose untracked files the
// superproject's git status does not show are those whose effective ignore is untracked,
// dirty or all: the repository's submodule.NAME.ignore over .gitmodules', over
// diff.ignoreSubmodules; a nested superproject's (private) configuration is not read, only its
// .gitmodules. The submodules need not be checked out for this (the setting is all read).
func TestHiddenSubmodules(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws := t.TempDir()
	gitIn := func(args ...string) {
		t.Helper()
		c := exec.Command("git", args...)
		c.Dir = ws
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitIn("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(ws, ".gitmodules"), []byte(`[submodule "vendored"]
	path = lib/vendored
	ignore = untracked
[submodule "all.of.it"]
	path = all
	ignore = all
[submodule "dirty"]
	path = d
	ignore = dirty
[submodule "shown"]
	path = shown
[submodule "overridden"]
	path = over
	ignore = all
[submodule "byconfig"]
	path = cfg
`), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn("config", "submodule.overridden.ignore", "none")
	gitIn("config", "submodule.byconfig.ignore", "untracked")
	got := func(private bool) string {
		h, err := hiddenSubmodules(context.Background(), ws, private)
		if err != nil {
			t.Fatal(err)
		}
		var ps []string
		for p := range h {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		return strings.Join(ps, " ")
	}
	if g, want := got(false), "all cfg d lib/vendored"; g != want {
		t.Errorf("hidden submodules of the workspace's repository: %q, want %q", g, want)
	}
	// A nested superproject's configuration may be a box's: its .gitmodules only.
	if g, want := got(true), "all d lib/vendored over"; g != want {
		t.Errorf("hidden submodules of a nested superproject: %q, want %q", g, want)
	}
	gitIn("config", "diff.ignoreSubmodules", "untracked")
	if g, want := got(false), "all cfg d lib/vendored shown"; g != want {
		t.Errorf("with diff.ignoreSubmodules=untracked: %q, want %q", g, want)
	}
	// No .gitmodules: none, and no error.
	os.Remove(filepath.Join(ws, ".gitmodules"))
	if g := got(false); g != "" {
		t.Errorf("without .gitmodules: %q, want none", g)
	}
}
