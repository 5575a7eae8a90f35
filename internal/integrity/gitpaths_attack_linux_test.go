package integrity_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackWorktreeIntoBoxCache (review 14, F16): the workspace has a nested repository lib
// (git-ignored by the top). A box makes, in the box cache (writable by boxes, kept across
// launches, at the same path on the host), a work tree holding a gitlink m whose .git leads to a
// gitdir there with core.fsmonitor, sets lib's core.worktree to that work tree and adds m to
// lib's index and lib to the top's index as gitlinks. Neither the .git of m nor its gitdir lie
// in the workspace, and core.worktree names no program: before, lib's config was kept, and the
// host's plain git status at the top (and in lib) entered m and ran the fsmonitor. A
// core.worktree leading out of the workspace is now a finding: lib's config is moved aside.
func TestAttackWorktreeIntoBoxCache(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	write(t, filepath.Join(e.work, ".gitignore"), "lib/\n")
	git(t, e.work, "add", ".gitignore")
	git(t, e.work, "commit", "-q", "-m", "ignore lib")
	lib := filepath.Join(e.work, "lib")
	os.Mkdir(lib, 0o755)
	git(t, lib, "init", "-q")
	write(t, filepath.Join(lib, "Makefile"), "all:\n")
	git(t, lib, "add", "Makefile")
	git(t, lib, "commit", "-q", "-m", "lib")
	mark, touch := e.marker("fsmonitor-worktree")
	out := e.boxPlant(fmt.Sprintf(`set -e
C=$(dirname "$(dirname "$CARGO_TARGET_DIR")")/f16
mkdir -p "$C/wt"
git init -q "$C/wt/m" --separate-git-dir "$C/m.git"
echo x > "$C/wt/m/f"
%[1]s -C "$C/wt/m" add f
%[1]s -C "$C/wt/m" commit -q -m m
git -C "$C/wt/m" config core.fsmonitor "%[2]s; false"
cp lib/Makefile "$C/wt/Makefile"
git -C lib config core.worktree "$C/wt"
git -C lib update-index --add --cacheinfo 160000,$(git -C "$C/wt/m" rev-parse HEAD),m
git update-index --add --cacheinfo 160000,$(git -C lib rev-parse HEAD),lib
echo planted`, boxGit, touch))
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant did not complete (the test would prove nothing):\n%s", out)
	}
	gs, _ := hostGit(e.work, "status", "--porcelain")
	notRun(t, mark, "the host's git status at the top:\n"+gs, out)
	os.Remove(mark)
	gs, _ = hostGit(lib, "status", "--porcelain")
	notRun(t, mark, "the host's git status in lib:\n"+gs, out)
	l := e.lastLaunch()
	p := "/lib/.git/config"
	if d := eventDetail(l, p); !l.Drift || !hasEvent(l, "created", p) && !hasEvent(l, "changed", p) ||
		!strings.Contains(d, "core.worktree") || !strings.Contains(d, "moved aside to") {
		t.Errorf("lib's config with core.worktree in the box cache is not recorded as moved aside: drift %v %+v", l.Drift, l.DriftEvents)
	}
}
