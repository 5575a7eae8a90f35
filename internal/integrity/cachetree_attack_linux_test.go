package integrity_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAttackSplitIndexSharedBehindAbsoluteSymlink: review 20b's plant (a forged cache tree in
// a split index, while the box runs) with one step more: the box moves the shared index to
// another name and puts an absolute symlink to it at its own name (the workspace is at its own
// path in the box). The host's git reads the shared index through it; the check, which follows
// no symlink out of the folder (an absolute one counts as out), could not, and its check of
// the box's git events skipped the index ("the full checks report it"), which a workspace the
// events cover never gets while the box runs: the user's git commit -a of a README edit wrote
// the box's pkg tree, while git status and git diff --cached showed nothing. Want: the host's
// commit holds the reviewed pkg/main.go, or git status named pkg/main.go before it (the index
// moved aside: the user runs git reset, as the alert says, before committing).
func TestAttackSplitIndexSharedBehindAbsoluteSymlink(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's index forger")
	}
	e := newDaemonEnv(t)
	review20Repo(t, e.work)
	var c userCommit
	var named string
	out := e.boxPlantDuring(plantForgedCacheTree+`$FORGE tree /tmp/box.idx
git update-index --split-index
s=$(ls .git/sharedindex.*)
mv "$s" .git/shared.real
ln -s "$PWD/.git/shared.real" "$s"
echo "box's git status: [$(git --no-optional-locks status --porcelain --untracked-files=no)]"
echo ready > `+syncFIFO+`; read go < `+syncFIFO+`
echo planted`, func() {
		e.awaitPeriodicChecks(2)
		if st := git(t, e.work, "status", "--porcelain", "--untracked-files=no"); strings.Contains(st, "pkg/main.go") {
			named = st // the user sees the change (or the alert) and does not commit blindly
			return
		}
		c = hostCommitShows(t, e.work)
	})
	if !strings.Contains(out, "planted") || !strings.Contains(out, "box's git status: []") {
		t.Fatalf("the plant failed, or the box's git did not read the split index through the symlink (the test would prove nothing):\n%s", out)
	}
	t.Logf("host git status naming pkg/main.go %q; else: git status %q, git diff --cached %q, HEAD:pkg/main.go after the user's commit:\n%s\nthe launch said:\n%s", named, c.status, c.cached, c.committed, out)
	if named == "" && c.boxCodeHidden() {
		t.Errorf("the host's git commit -a of the user's README while the box ran committed the box's pkg/main.go (a forged cache tree in a split index whose shared index lies behind an absolute symlink, which the check cannot read and git does), while the host's git status (%q) and git diff --cached (%q) showed nothing", c.status, c.cached)
	}
}
