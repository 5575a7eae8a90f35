package integrity

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBranchesRewrittenAtExit (review 15, F9): a box that amends the user's last commit (same
// message and date, the reflog expired), resets another branch back, and deletes a third left
// git status, git diff and git log showing nothing new. The check at exit reports each, naming
// the old and new ids, both for loose and packed refs; a branch that moved forward (a commit)
// and a new branch are ordinary work.
func TestBranchesRewrittenAtExit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(args ...string) string { return strings.TrimSpace(gitIn(ws, "", false, args...)) }
	git("init", "-q", "-b", "main", ws)
	for _, n := range []string{"one", "two", "three"} {
		mustWrite(t, filepath.Join(ws, n), n+"\n")
		git("add", n)
		git("commit", "-qm", n)
	}
	git("branch", "feature")
	git("branch", "old")
	git("branch", "ahead")
	git("pack-refs", "--all") // feature and old packed; main moves to a loose ref when amended
	mainWas, featureWas, oldWas := git("rev-parse", "main"), git("rev-parse", "feature"), git("rev-parse", "old")
	s := Snapshot(resolveWS(t, ws), Limits{})
	if len(s.Branches) != 1 {
		t.Fatalf("branches recorded: %v", s.Branches)
	}
	// The box: its edit folded into the user's commit three, feature reset back, old deleted,
	// ahead moved forward, a branch of its own.
	mustWrite(t, filepath.Join(ws, "Makefile"), "all:\n\t@echo BOX\n")
	git("add", "Makefile")
	git("commit", "-q", "--amend", "--no-edit", "--date="+git("log", "-1", "--format=%ad"))
	git("update-ref", "refs/heads/feature", "HEAD~2")
	git("branch", "-D", "old")
	git("checkout", "-q", "ahead")
	mustWrite(t, filepath.Join(ws, "four"), "four\n")
	git("add", "four")
	git("commit", "-qm", "four")
	git("checkout", "-q", "-b", "boxown")
	git("reflog", "expire", "--expire=now", "--all")
	if ts := s.VerifyExec(); len(ts) != 0 {
		t.Errorf("while the box runs, branch moves are not checked: %+v", ts)
	}
	got := map[string]string{}
	for _, tr := range s.VerifyExit() {
		if tr.Alert {
			got[filepath.Base(tr.Path)] = tr.Detail
		}
	}
	for name, want := range map[string][]string{
		"main":    {"history of the branch main was rewritten", mainWas, "git branch -f main " + mainWas},
		"feature": {"history of the branch feature was rewritten", featureWas},
		"old":     {"branch old was deleted", oldWas},
	} {
		for _, w := range want {
			if !strings.Contains(got[name], w) {
				t.Errorf("%s: alert %q lacks %q", name, got[name], w)
			}
		}
		delete(got, name)
	}
	if len(got) != 0 {
		t.Errorf("alerts for ordinary work (a commit, a new branch): %v", got)
	}
}
