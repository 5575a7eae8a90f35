package integrity_test

// The attacks on the scan of the workspace. This file's name sorts before the package's other
// box tests on purpose: go test resumes parallel tests in the order they are declared, files
// by name, and these two are the package's longest (removing their 20,005 and 4,301 folders
// afterwards waits on the disk): started first, they run beside the others instead of after
// them (docs/benchmarks.md, "CI time").

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

// lastLaunch returns the most recently started launch.
func (e *daemonEnv) lastLaunch() api.Launch {
	e.t.Helper()
	ls := e.launches()
	if len(ls) == 0 {
		e.t.Fatal("no launch recorded")
	}
	last := ls[0]
	for _, l := range ls[1:] {
		if l.Started.After(last.Started) {
			last = l
		}
	}
	return last
}

// TestAttackDotGitIntoBoxCache: a box makes a bare repository in the box cache (writable by
// boxes, kept across launches, at the same path on the host) whose config sets
// core.fsmonitor, points vendor/lib/.git (a .git file, added to the index as a gitlink) and
// d/.git (a symlink) at it. The host's plain git status at the top, in vendor/lib and in d
// must not run it: both pointers are new and lead out of the workspace, so they are moved
// aside and recorded as drift.
//
// Review 13, F9: the workspace has two uninitialised submodules, lib (in .gitmodules and the
// index) and lib2 (a gitlink in the index only), whose folders are empty, as after git
// submodule deinit or a clone without --recurse-submodules. The box points lib/.git and
// lib2/.git at its repository, waits until every pointer is gone, makes lib/.git again (after
// the watch's check) and waits again; then, while the box still runs, the host's git status
// at the top, which enters every populated gitlink, must not run the fsmonitor. Before, the
// pointers stayed until the check at exit, and that git status ran it.
func TestAttackDotGitIntoBoxCache(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	write(t, filepath.Join(e.work, ".gitmodules"), "[submodule \"lib\"]\n\tpath = lib\n\turl = ./lib-origin\n")
	head := strings.TrimSpace(git(t, e.work, "rev-parse", "HEAD"))
	for _, sub := range []string{"lib", "lib2"} {
		git(t, e.work, "update-index", "--add", "--cacheinfo", "160000,"+head+","+sub)
		os.Mkdir(filepath.Join(e.work, sub), 0o755)
	}
	git(t, e.work, "add", ".gitmodules")
	git(t, e.work, "commit", "-q", "-m", "submodules")
	mark1, touch1 := e.marker("fsmonitor-file")
	mark2, touch2 := e.marker("fsmonitor-symlink")
	out := e.boxPlantDuring(fmt.Sprintf(`set -e
C=$(dirname "$(dirname "$CARGO_TARGET_DIR")")/y
git init -q --bare "$C/evil.git"
printf '[core]\n\tbare = false\n\tfsmonitor = "%s; false"\n' >> "$C/evil.git/config"
mkdir -p vendor/lib && echo "gitdir: $C/evil.git" > vendor/lib/.git
%s --git-dir="$C/evil.git" --work-tree=vendor/lib commit -q --allow-empty -m x
git update-index --add --cacheinfo 160000,$(git --git-dir="$C/evil.git" rev-parse HEAD),vendor/lib
git init -q --bare "$C/evil2.git"
printf '[core]\n\tbare = false\n\tfsmonitor = "%s; false"\n' >> "$C/evil2.git/config"
mkdir d && ln -s "$C/evil2.git" d/.git
echo "gitdir: $C/evil.git" > lib/.git
echo "gitdir: $C/evil.git" > lib2/.git
set +e
here() { for p in lib/.git lib2/.git d/.git vendor/lib/.git; do if [ -e $p ] || [ -L $p ]; then echo $p; fi; done; }
wait_gone() { i=0; while [ -n "$(here)" ] && [ $i -lt 250 ]; do sleep 0.02; i=$((i+1)); done; }
wait_gone
echo "gitdir: $C/evil.git" > lib/.git
wait_gone
echo "left while the box runs: $(here)"
echo planted
echo ready > %[4]s; read x < %[4]s`, touch1, boxGit, touch2, syncFIFO), func() {
		// While the box runs: the host's git status at the top enters lib, lib2 and vendor/lib.
		gs, _ := hostGit(e.work, "status")
		if _, err := os.Lstat(mark1); err == nil {
			t.Errorf("the host's git status at the top, while the box ran, ran the box's fsmonitor:\n%s", gs)
			os.Remove(mark1)
		}
	})
	requirePlanted(t, out)
	if !strings.Contains(out, "left while the box runs: \n") {
		t.Errorf("pointers stayed in the workspace while the box ran:\n%s", out)
	}
	if _, err := os.Lstat(mark1); err == nil {
		t.Fatalf("the box created the host's marker itself: the test cannot tell host from box\n%s", out)
	}
	gs, _ := hostGit(e.work, "status")
	notRun(t, mark1, "the host's git status at the top:\n"+gs, out)
	gs, _ = hostGit(filepath.Join(e.work, "vendor", "lib"), "status")
	notRun(t, mark1, "the host's git status in vendor/lib:\n"+gs, out)
	gs, _ = hostGit(filepath.Join(e.work, "lib"), "status")
	notRun(t, mark1, "the host's git status in lib:\n"+gs, out)
	gs, _ = hostGit(filepath.Join(e.work, "d"), "status")
	notRun(t, mark2, "the host's git status in d (symlinked .git):\n"+gs, out)
	l := e.lastLaunch()
	for _, p := range []string{"/vendor/lib/.git", "/d/.git"} {
		if !l.Drift || !hasEvent(l, "created", p) || !strings.Contains(eventDetail(l, p), "leading out of the workspace") ||
			!strings.Contains(eventDetail(l, p), "moved aside to") {
			t.Errorf("the planted pointer %s is not recorded as moved aside: drift %v %+v", p, l.Drift, l.DriftEvents)
		}
	}
	if t.Failed() {
		t.Logf("the box said:\n%s", out)
	}
}

// TestDotGitOutsideAtLaunchKept: a .git pointer that leads out of the workspace and existed
// at launch (here a linked worktree, inside the workspace, of a repository elsewhere) is the
// user's: a box that does not touch it leaves it in place and raises no drift.
func TestDotGitOutsideAtLaunchKept(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	other := filepath.Join(e.root, "other")
	os.Mkdir(other, 0o755)
	repo(t, other)
	git(t, other, "worktree", "add", "-q", filepath.Join(e.work, "wt"))
	out := e.boxPlant("echo ran")
	if _, err := os.Lstat(filepath.Join(e.work, "wt", ".git")); err != nil {
		t.Fatalf("the linked worktree's own .git file was moved: %v\n%s", err, out)
	}
	if l := e.lastLaunch(); hasEvent(l, "created", "/wt/.git") || hasEvent(l, "modified", "/wt/.git") {
		t.Errorf("a .git pointer present at launch is reported: %+v", l.DriftEvents)
	}
	if gs, err := hostGit(filepath.Join(e.work, "wt"), "status"); err != nil {
		t.Errorf("git status in the linked worktree after the box: %v\n%s", err, gs)
	}
}

// TestAttackScanManyFolders: a box makes more than 20000 folders (named so that the
// depth-first scan visits them first) and a nested repository whose config sets
// core.fsmonitor. The check at exit must still find it and move it aside; the host's
// git -C a status must not run it.
func TestAttackScanManyFolders(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	mark, touch := e.marker("fsmonitor")
	out := e.boxPlant(fmt.Sprintf(`set -e
mkdir zz && cd zz && seq 1 20005 | xargs mkdir && cd ..
git init -q a
printf '[core]\n\tfsmonitor = "%s; false"\n' >> a/.git/config
echo planted`, touch))
	requirePlanted(t, out)
	gs, _ := hostGit(filepath.Join(e.work, "a"), "status")
	notRun(t, mark, "the host's git -C a status:\n"+gs, out)
	l := e.lastLaunch()
	if !hasEvent(l, "created", "/a/.git/config") || !strings.Contains(eventDetail(l, "/a/.git/config"), "moved aside to") {
		t.Errorf("the nested repository's config is not recorded as moved aside: %+v", l.DriftEvents)
	}
}

// TestAttackBeyondEventCover guards review 10's finding F6: a box makes 4,301 folders (more than
// the 4,096 the file events cover), then, beyond them, a nested repository whose config sets
// core.fsmonitor, added as a gitlink, and waits while the host could run git status. Before,
// no check looked beyond the cover while the box ran (an event in a covered folder rescanned
// that folder only, a periodic check only the roots): the config stayed until the check at
// exit, and the host's git status in the meantime ran the fsmonitor. Now, once the cover is
// lost, each check rescans the whole workspace: the config is moved aside while the box runs.
func TestAttackBeyondEventCover(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	_, touch := e.marker("fsmonitor")
	out := e.boxPlant(fmt.Sprintf(`set -e
mkdir pad && (cd pad && seq -f d%%g 0 4300 | xargs mkdir)
mkdir pad/z && git init -q pad/z/m && %s -C pad/z/m commit -q --allow-empty -m x
printf '[core]\n\tfsmonitor = "%s; false"\n' >> pad/z/m/.git/config
git add pad/z/m
echo planted
i=0; while [ -e pad/z/m/.git/config ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done
[ -e pad/z/m/.git/config ] && echo still-there || echo moved-during-run`, boxGit, touch))
	requirePlanted(t, out)
	if !strings.Contains(out, "moved-during-run") {
		t.Errorf("the nested repository's config stayed while the box ran (the host's git status would run its fsmonitor):\n%s", out)
	}
	l := e.lastLaunch()
	p := "/pad/z/m/.git/config"
	if !hasEvent(l, "created", p) || !strings.Contains(eventDetail(l, p), "moved aside to") {
		t.Errorf("the nested repository's config is not recorded as moved aside: %+v", l.DriftEvents)
	}
	for _, ev := range l.DriftEvents {
		if strings.HasSuffix(ev.Path, p) && ev.Source == "exit" {
			t.Errorf("moved aside only at exit: %+v", ev)
		}
	}
}
