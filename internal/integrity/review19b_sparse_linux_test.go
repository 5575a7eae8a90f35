package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackSparseDirectoryEntryHidesEdit (review 19b): fix19c clears at exit the
// skip-worktree bit of each file entry the launch flagged whose file is present, but keeps a
// sparse index's directory entry flagged ("git requires it there … and the host's git status
// shows a file written beneath it later all the same, since git clears the flag of a present
// file under a sparse checkout": docs/integrity.md, TestIndexSparseDirectoryLeftAtExit). That
// holds only while the repository's configuration turns the sparse checkout on. In a box, git
// sparse-checkout's configuration given on its command line (-c core.sparseCheckout=true -c
// core.sparseCheckoutCone=true -c index.sparse=true; the host's .git/config is pinned and
// never gets it) and a cone of keep/ in .git/info/sparse-checkout, git read-tree -mu HEAD and
// git sparse-checkout reapply leave the index (the box's to write) with one entry src/ (a tree, skip-worktree) for
// the tracked src/a.go; the box then writes src/a.go. On the host, with its configuration
// unchanged (no sparse checkout), git expands the directory entry into src/a.go flagged
// skip-worktree: git status, git diff HEAD show nothing, and the host's build uses the box's
// src/a.go. Measured on lead19 (root): the check at exit takes the directory entry src for a
// present file it flagged, clears its bit and alerts "modified src: … the flag was cleared: git
// shows the file's changes as ordinary work"; git then warns "index entry is a directory, but
// not sparse", expands it with src/a.go flagged skip-worktree (ls-files -t: S), and shows no
// change. Want: the edit shown by the host's git (or src/a.go named at the end of run).
func TestAttackSparseDirectoryEntryHidesEdit(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	write(t, filepath.Join(e.work, "src", "a.go"), "package src\n")
	write(t, filepath.Join(e.work, "keep", "k"), "k\n")
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "src")
	out := e.boxPlant(`mkdir -p .git/info && printf '/*\n!/*/\n/keep/\n' > .git/info/sparse-checkout &&
S='-c core.sparseCheckout=true -c core.sparseCheckoutCone=true -c index.sparse=true' &&
git $S read-tree -mu HEAD && git $S sparse-checkout reapply && git $S ls-files --sparse -s -t &&
mkdir -p src && echo 'package src // BOX' > src/a.go && echo planted`)
	if !strings.Contains(out, "planted") || !strings.Contains(out, "040000") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	got, _ := os.ReadFile(filepath.Join(e.work, "src", "a.go"))
	status := git(t, e.work, "status", "--porcelain", "--untracked-files=no")
	diff := git(t, e.work, "diff", "HEAD", "--stat")
	ls, _ := exec.Command("git", "-C", e.work, "ls-files", "-t", "-s").CombinedOutput()
	cfg, _ := os.ReadFile(filepath.Join(e.work, ".git", "config"))
	t.Logf("src/a.go on the host: %q; git status %q; git diff HEAD %q; ls-files -t:\n%s\nthe host's .git/config:\n%s\nthe end of run:\n%s", got, status, diff, ls, cfg, out)
	if strings.Contains(string(got), "BOX") && !strings.Contains(status, "src/a.go") && !strings.Contains(diff, "src/a.go") && !strings.Contains(out, "src/a.go") {
		t.Errorf("the box's src/a.go (%q) stayed on the host, and neither the host's git status (%q) and git diff HEAD (%q) nor the end of run name it (the alert on src says git shows the change)", got, status, diff)
	}
}
