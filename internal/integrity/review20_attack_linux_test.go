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
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's index forger")
	}
	e := newDaemonEnv(t)
	review20Repo(t, e.work)
	// Launch A: the forged index beside the real one, the real one as HEAD's.
	outA := e.boxPlant(review20Forge + `printf 'package main\n\nfunc main() { println("BOX CODE RAN") }\n' > pkg/main.go
git add pkg/main.go
git write-tree >/dev/null
cp .git/index /tmp/box.idx
git reset -q
git checkout -- pkg/main.go
cp .git/index .git/x.idx
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
	status := git(t, e.work, "status", "--porcelain", "--untracked-files=no")
	cached := git(t, e.work, "diff", "--cached", "--stat")
	// The user's own work, committed as usual.
	write(t, filepath.Join(e.work, "README"), "the user's own edit\n")
	git(t, e.work, "commit", "-qam", "user: readme")
	committed := git(t, e.work, "show", "HEAD:pkg/main.go")
	t.Logf(".git/index after launch B: symlink to %q; host git status before the commit %q; git diff --cached %q; HEAD:pkg/main.go after the user's commit:\n%s\nlaunch A said:\n%s\nlaunch B said:\n%s", link, status, cached, committed, outA, outB)
	if strings.Contains(committed, "BOX CODE") && !strings.Contains(status, "pkg/main.go") && !strings.Contains(cached, "pkg/main.go") {
		t.Errorf("the host's git commit -a of the user's README committed the box's pkg/main.go (the forged cache tree of launch A, put in place by launch B's symlink, which the check at exit of launch B left: its target's ctime is launch A's), while the host's git status (%q) and git diff --cached (%q) showed nothing", status, cached)
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
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's index forger")
	}
	e := newDaemonEnv(t)
	review20Repo(t, e.work)
	var status, cached, committed string
	out := e.boxPlantDuring(review20Forge+`printf 'package main\n\nfunc main() { println("BOX CODE RAN") }\n' > pkg/main.go
git add pkg/main.go
git write-tree >/dev/null
cp .git/index /tmp/box.idx
git reset -q
git checkout -- pkg/main.go
$FORGE tree /tmp/box.idx
echo "box's git status: [$(git --no-optional-locks status --porcelain --untracked-files=no)]"
echo ready > `+syncFIFO+`; read go < `+syncFIFO+`
echo planted`, func() {
		// Two periodic checks (every second here) while the box runs.
		n := strings.Count(e.daemonLog(), "integrity check (periodic)")
		for end := time.Now().Add(30 * time.Second); strings.Count(e.daemonLog(), "integrity check (periodic)") < n+2 && time.Now().Before(end); {
			time.Sleep(100 * time.Millisecond)
		}
		status = git(t, e.work, "status", "--porcelain", "--untracked-files=no")
		cached = git(t, e.work, "diff", "--cached", "--stat")
		write(t, filepath.Join(e.work, "README"), "the user's own edit\n")
		git(t, e.work, "commit", "-qam", "user: readme")
		committed = git(t, e.work, "show", "HEAD:pkg/main.go")
	})
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	t.Logf("host git status while the box ran %q; git diff --cached %q; HEAD:pkg/main.go after the user's commit:\n%s\nthe launch said:\n%s", status, cached, committed, out)
	if strings.Contains(committed, "BOX CODE") && !strings.Contains(status, "pkg/main.go") && !strings.Contains(cached, "pkg/main.go") {
		t.Errorf("the host's git commit -a of the user's README while the box ran committed the box's pkg/main.go (a forged cache tree the checks leave while the box runs), while the host's git status (%q) and git diff --cached (%q) showed nothing", status, cached)
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
	out := e.boxPlant(review20Forge + `printf 'package main\n\nfunc main() { println("BOX CODE RAN") }\n' > pkg/main.go
git add pkg/main.go
git write-tree >/dev/null
cp .git/index /tmp/box.idx
git reset -q
git checkout -- pkg/main.go
$FORGE tree /tmp/box.idx
chmod 0555 .git
echo planted`)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	// The user's commit failed; they make .git writable again, as git's message leads them to.
	if err := os.Chmod(filepath.Join(e.work, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	status := git(t, e.work, "status", "--porcelain", "--untracked-files=no")
	cached := git(t, e.work, "diff", "--cached", "--stat")
	write(t, filepath.Join(e.work, "README"), "the user's own edit\n")
	git(t, e.work, "commit", "-qam", "user: readme")
	committed := git(t, e.work, "show", "HEAD:pkg/main.go")
	t.Logf("host git status before the commit %q; git diff --cached %q; HEAD:pkg/main.go after the user's commit:\n%s\nthe launch said:\n%s", status, cached, committed, out)
	if strings.Contains(committed, "BOX CODE") && !strings.Contains(out, ".git/index") && !strings.Contains(status, "pkg/main.go") {
		t.Errorf("the host's git commit -a committed the box's pkg/main.go (a forged cache tree the check at exit could not remove, and said nothing of), while git status (%q) showed nothing and the end of run did not name the index", status)
	}
}
