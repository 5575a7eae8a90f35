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

// TestBoxMadeRepositoryChecks: in a workspace in no repository at the snapshot, the box makes
// one at the top (git init) and commits; the checks at exit read it as the host's git status
// does, and run nothing of its configuration. What its ignore rules hide (.gitignore,
// info/exclude, and the file its core.excludesFile names beneath the workspace) and the launch
// wrote is taken; its untracked files stay, those git status folds named, every one where its
// config sets status.showUntrackedFiles=no; the user's file from before the launch and the
// committed ones stay (but for one in a folder its .gitignore hides that the box wrote into,
// taken with the folder, as in any repository). Its config also makes it a partial clone whose promisor remote's
// uploadpack is a command, with a sparse index missing a tree: run with that config (as the
// workspace's own repository was), git ls-files --stage fetches the tree and runs the command
// (checked first, so the test proves something); the checks must not, even before the scan
// at exit has moved that config aside.
func TestBoxMadeRepositoryChecks(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	if !surelyNoRepository(ws) {
		t.Skipf("%s lies beneath a .git or a HEAD", ws)
	}
	mustWrite(t, filepath.Join(ws, "user.txt"), "the user's\n")
	mustWrite(t, filepath.Join(ws, "old", "keep.txt"), "the user's, in a folder the box's .gitignore ignores\n")
	s := Snapshot(resolveWS(t, ws), Limits{})
	if !s.NoRepository {
		t.Fatal("the snapshot of a workspace in no repository has NoRepository false")
	}
	time.Sleep(20 * time.Millisecond) // a box starts tens of ms after the snapshot
	git := func(args ...string) string {
		t.Helper()
		out := gitIn(ws, "", false, args...)
		if strings.Contains(out, "(exit status") {
			t.Fatalf("git %v: %s", args, out)
		}
		return strings.TrimSpace(out)
	}
	// The box.
	git("init", "-q", "-b", "main")
	mustWrite(t, filepath.Join(ws, ".gitignore"), "dist/\nold/\n")
	mustWrite(t, filepath.Join(ws, "myignore"), "secret_test.go\n")
	mustWrite(t, filepath.Join(ws, ".git", "info", "exclude"), "hidden/\n")
	mustWrite(t, filepath.Join(ws, "a", "f"), "a\n")
	mustWrite(t, filepath.Join(ws, "b", "g"), "b\n")
	git("add", ".gitignore", "myignore", "a", "b", "user.txt")
	git("commit", "-q", "-m", "box")
	git("config", "core.excludesFile", "myignore")
	git("sparse-checkout", "set", "--cone", "a")
	git("config", "index.sparse", "true")
	git("sparse-checkout", "reapply")
	tree := git("rev-parse", "HEAD:b")
	if err := os.Remove(filepath.Join(ws, ".git", "objects", tree[:2], tree[2:])); err != nil {
		t.Fatal(err)
	}
	mark := plantPromisor(t, ws, ws)
	gitIn(ws, "", false, "-c", "core.fsmonitor=false", "ls-files", "--stage")
	if _, err := os.Lstat(mark); err != nil {
		t.Fatalf("the planted configuration did not run with the host's git (the test would prove nothing): %v", err)
	}
	os.Remove(mark)
	for _, f := range []string{"dist/app", "hidden/h.sh", "secret_test.go", "old/new.txt", "top.go", "folded/x/y.go"} {
		mustWrite(t, filepath.Join(ws, f), "box\n")
	}

	ign := s.IgnoredChanged(context.Background())
	if _, err := os.Lstat(mark); err == nil {
		t.Fatal("the check of the git-ignored places ran the command of the box's configuration")
	}
	if len(ign.Failed)+len(ign.NotChecked) > 0 {
		t.Errorf("the check of the git-ignored places failed: %+v", ign)
	}
	// old/keep.txt is the user's, from before the launch, in a folder the box's .gitignore
	// ignores and the box wrote into (its ctime in the launch): taken with the folder, into the
	// proposed changes (agentbox apply puts it back), as in a repository whose .gitignore a box
	// edits; no record of the folders there at launch was made, the workspace being in no
	// repository then.
	want := []string{"dist/app", "hidden/h.sh", "old/keep.txt", "old/new.txt", "secret_test.go"}
	for _, f := range want {
		if !slices.Contains(ign.Files, filepath.FromSlash(f)) {
			t.Errorf("%s, which the box-made repository's ignore rules hide, is not taken: %v", f, ign.Files)
		}
	}
	for _, f := range ign.Files {
		if !slices.Contains(want, filepath.ToSlash(f)) {
			t.Errorf("%s is taken, want only %v", f, want)
		}
	}
	unt, err := s.UntrackedUnlisted(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(mark); err == nil {
		t.Fatal("the check of the untracked files ran the command of the box's configuration")
	}
	if !slices.Equal(unt.Files, []string{filepath.FromSlash("folded/x/y.go")}) {
		t.Errorf("untracked files git status does not name: %v, want folded/x/y.go", unt.Files)
	}
	git("config", "status.showUntrackedFiles", "no")
	unt, err = s.UntrackedUnlisted(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(unt.Files, "top.go") || !strings.Contains(unt.Why, "showUntrackedFiles=no") {
		t.Errorf("with the box-made repository's status.showUntrackedFiles=no: %+v, want top.go named", unt)
	}
	if _, err := os.Lstat(mark); err == nil {
		t.Fatal("the check of the untracked files ran the command of the box's configuration")
	}
}
