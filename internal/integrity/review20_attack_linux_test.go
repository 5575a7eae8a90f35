package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// review20Forge is the shell preamble of a box script that writes indexForger to
// /tmp/forge.py ($FORGE runs it).
const review20Forge = "set -e\nFORGE='python3 /tmp/forge.py'\ncat > /tmp/forge.py <<'FORGER'\n" + indexForger + "FORGER\n"

// plantForgedCacheTree is the start of a box script of review 20's plant: the box stages its
// own pkg/main.go and writes its trees (git add, git write-tree), keeps that index at
// /tmp/box.idx, and puts the index and pkg/main.go back to HEAD's; "$FORGE tree /tmp/box.idx"
// then gives an index of HEAD's entries that index's cache tree, which git status and git
// diff --cached do not show and the host's next git commit writes.
const plantForgedCacheTree = review20Forge + `printf 'package main\n\nfunc main() { println("BOX CODE RAN") }\n' > pkg/main.go
git add pkg/main.go
git write-tree >/dev/null
cp .git/index /tmp/box.idx
git reset -q
git checkout -- pkg/main.go
`

// userCommit is what the host's git showed the user before their commit (git status, git
// diff --cached), and the pkg/main.go the commit holds.
type userCommit struct{ status, cached, committed string }

// hostCommitShows is the user's side of review 20's attack on the host: git status and git
// diff --cached, then git commit -a of an edit of README of their own.
func hostCommitShows(t *testing.T, ws string) userCommit {
	t.Helper()
	status := git(t, ws, "status", "--porcelain", "--untracked-files=no")
	cached := git(t, ws, "diff", "--cached", "--stat")
	write(t, filepath.Join(ws, "README"), "the user's own edit\n")
	git(t, ws, "commit", "-qam", "user: readme")
	return userCommit{status, cached, git(t, ws, "show", "HEAD:pkg/main.go")}
}

// boxCodeHidden reports whether the user's commit holds the box's pkg/main.go while neither
// git status nor git diff --cached named it.
func (c userCommit) boxCodeHidden() bool {
	return strings.Contains(c.committed, "BOX CODE") && !strings.Contains(c.status, "pkg/main.go") && !strings.Contains(c.cached, "pkg/main.go")
}

// awaitPeriodicChecks waits, up to 30 seconds, for k more periodic checks of the daemon.
func (e *daemonEnv) awaitPeriodicChecks(k int) {
	n := strings.Count(e.daemonLog(), "integrity check (periodic)")
	for end := time.Now().Add(30 * time.Second); strings.Count(e.daemonLog(), "integrity check (periodic)") < n+k && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
	}
}

// review20Repo makes the workspace: a repository whose pkg/main.go is the reviewed code.
func review20Repo(t *testing.T, ws string) {
	git(t, ws, "init", "-q", "-b", "main")
	write(t, filepath.Join(ws, "README"), "reviewed readme\n")
	write(t, filepath.Join(ws, "pkg/main.go"), "package main\n\nfunc main() { println(\"hello\") }\n")
	write(t, filepath.Join(ws, "go.mod"), "module x\n\ngo 1.20\n")
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-qm", "init")
}

// TestAttackIndexSymlinkKeepsCacheTree: the check at exit removes the index's extensions
// (the cache tree among them) only from "an index the launch changed (its ctime)"
// (docs/integrity.md, "The check reads the entries in sequence"), and it takes that ctime
// with os.Stat, through a symlink. So launch A writes, beside the index, a forged index:
// HEAD's entries (the reviewed pkg/main.go, its stat data the work tree's) and the cache tree
// of an index that staged the box's pkg/main.go (its blob and trees written by git add and
// git write-tree). Launch B, a later launch in the same workspace, only points .git/index at
// that file: a symlink, whose target's ctime is launch A's, so the check at exit of launch B
// leaves the cache tree. The host's git status shows nothing (the entries are HEAD's; git
// reads the index through the symlink), and the host's next git commit -a of an edit of the
// user's own writes the box's pkg tree, named by the cache tree, into the commit: the box's
// code lands in the user's history, never shown by any git view. Want: the host's commit
// holds the reviewed pkg/main.go (or git status named the change before it).
func TestAttackIndexSymlinkKeepsCacheTree(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's index forger")
	}
	e := newDaemonEnv(t)
	review20Repo(t, e.work)
	// Launch A: the forged index beside the real one, the real one as HEAD's.
	outA := e.boxPlant(plantForgedCacheTree + `cp .git/index .git/x.idx
GIT_INDEX_FILE=.git/x.idx $FORGE tree /tmp/box.idx
echo "forged index status: [$(GIT_INDEX_FILE=.git/x.idx git --no-optional-locks status --porcelain --untracked-files=no)]"
echo planted-A`)
	if !strings.Contains(outA, "planted-A") {
		t.Fatalf("launch A's plant failed (the test would prove nothing):\n%s", outA)
	}
	if _, err := os.Stat(filepath.Join(e.work, ".git/x.idx")); err != nil {
		t.Fatalf("launch A's forged index is not on the host after its check at exit (the test would prove nothing): %v\n%s", err, outA)
	}
	// Launch B, a later launch: the index becomes a symlink to launch A's file.
	time.Sleep(1500 * time.Millisecond) // launch B starts (its since: its start less a second) past launch A's file
	outB := e.boxPlant(`ln -sf x.idx .git/index && echo planted-B`)
	if !strings.Contains(outB, "planted-B") {
		t.Fatalf("launch B's plant failed (the test would prove nothing):\n%s", outB)
	}
	link, _ := os.Readlink(filepath.Join(e.work, ".git/index"))
	// The user's own work, committed as usual.
	c := hostCommitShows(t, e.work)
	t.Logf(".git/index after launch B: symlink to %q; host git status before the commit %q; git diff --cached %q; HEAD:pkg/main.go after the user's commit:\n%s\nlaunch A said:\n%s\nlaunch B said:\n%s", link, c.status, c.cached, c.committed, outA, outB)
	if c.boxCodeHidden() {
		t.Errorf("the host's git commit -a of the user's README committed the box's pkg/main.go (the forged cache tree of launch A, put in place by launch B's symlink, which the check at exit of launch B left: its target's ctime is launch A's), while the host's git status (%q) and git diff --cached (%q) showed nothing", c.status, c.cached)
	}
}

// TestAttackCacheTreeCommittedWhileBoxRuns: "While the box runs, extensions are left alone"
// (docs/integrity.md, "The check reads the entries in sequence"; session 20 moved their
// removal to the check at exit, and a workspace the file events cover never had them removed
// before the exit either: the periodic check reads no index there). A box forges the cache
// tree of .git/index (HEAD's entries, the trees of its own pkg/main.go, as in
// TestAttackIndexSymlinkKeepsCacheTree) and goes on running; the user, meanwhile, commits an
// edit of their own with git commit -a after two periodic checks: git status and git diff
// --cached show nothing, and the commit holds the box's pkg/main.go. The check at exit then
// removes the cache tree, too late: the commit is the user's history. Want: the host's commit
// holds the reviewed pkg/main.go (or git status named the change before it).
func TestAttackCacheTreeCommittedWhileBoxRuns(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's index forger")
	}
	e := newDaemonEnv(t)
	review20Repo(t, e.work)
	var c userCommit
	out := e.boxPlantDuring(plantForgedCacheTree+`$FORGE tree /tmp/box.idx
echo "box's git status: [$(git --no-optional-locks status --porcelain --untracked-files=no)]"
echo ready > `+syncFIFO+`; read go < `+syncFIFO+`
echo planted`, func() {
		// Two periodic checks (every second here) while the box runs.
		e.awaitPeriodicChecks(2)
		c = hostCommitShows(t, e.work)
	})
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	t.Logf("host git status while the box ran %q; git diff --cached %q; HEAD:pkg/main.go after the user's commit:\n%s\nthe launch said:\n%s", c.status, c.cached, c.committed, out)
	if c.boxCodeHidden() {
		t.Errorf("the host's git commit -a of the user's README while the box ran committed the box's pkg/main.go (a forged cache tree the checks leave while the box runs), while the host's git status (%q) and git diff --cached (%q) showed nothing", c.status, c.cached)
	}
}

// TestAttackCacheTreeKeptWhenStripFails: the check at exit removes a cache tree (TREE) alone
// "quietly", and strippedTransition stays quiet when the removal fails too (cerr set: no
// transition, no alert, and no later check, which only an index written beside git's lock
// gets). A box that forges the cache tree and leaves .git unwritable to the daemon (mode
// 0555: the daemon of an ordinary user cannot take index.lock; root's daemon can) keeps it:
// the end of run says nothing of it, and once the user makes .git writable again (their
// git commit failed: "Unable to create '.git/index.lock': Permission denied"), their commit -a
// holds the box's pkg/main.go. Want: the host's commit holds the reviewed pkg/main.go, or the
// end of run names the index.
func TestAttackCacheTreeKeptWhenStripFails(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's index forger")
	}
	e := newDaemonEnv(t)
	review20Repo(t, e.work)
	out := e.boxPlant(plantForgedCacheTree + `$FORGE tree /tmp/box.idx
chmod 0555 .git
echo planted`)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	// The user's commit failed; they make .git writable again, as git's message leads them to.
	if err := os.Chmod(filepath.Join(e.work, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := hostCommitShows(t, e.work)
	t.Logf("host git status before the commit %q; git diff --cached %q; HEAD:pkg/main.go after the user's commit:\n%s\nthe launch said:\n%s", c.status, c.cached, c.committed, out)
	if strings.Contains(c.committed, "BOX CODE") && !strings.Contains(out, ".git/index") && !strings.Contains(c.status, "pkg/main.go") {
		t.Errorf("the host's git commit -a committed the box's pkg/main.go (a forged cache tree the check at exit could not remove, and said nothing of), while git status (%q) showed nothing and the end of run did not name the index", c.status)
	}
}
