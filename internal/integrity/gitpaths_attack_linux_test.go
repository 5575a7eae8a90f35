package integrity_test

import (
	"fmt"
	"os"
	"os/exec"
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
	requirePlanted(t, out)
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

// TestAttackUserIncludeInWorkspace (review 14, F17): the user's own git configuration
// ($XDG_CONFIG_HOME/git/config) includes ~/inc.gitconfig, which includes, for every repository
// beneath the workspace (includeIf "gitdir:WORK/", by a path relative to itself), WORK/.gitconfig:
// the common layout of a folder of repositories with its own identity, the folder the agent is
// started in. A box appends core.fsmonitor to that file: before, it was an ordinary file, and
// the host's git status in any repository beneath ran the box's command. The user's
// core.excludesFile in the workspace (a box's line would hide its new file from the host's git
// status) and init.templateDir there (absent: the hooks the host's next git init or clone
// copies) are pinned and guarded as well.
func TestAttackUserIncludeInWorkspace(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	cfg := strings.TrimPrefix(e.vars[len(e.vars)-1], "XDG_CONFIG_HOME=")
	rel, err := filepath.Rel(e.home, e.work)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(cfg, "git", "config"), "[user]\n\tname = Host\n\temail = host@example.org\n[include]\n\tpath = ~/inc.gitconfig\n"+
		"[core]\n\texcludesFile = "+filepath.Join(e.work, ".gitexcludes")+"\n[init]\n\ttemplateDir = "+filepath.Join(e.work, ".tmpl")+"\n")
	write(t, filepath.Join(e.home, "inc.gitconfig"), fmt.Sprintf("[includeIf \"gitdir:%s/\"]\n\tpath = %s\n", e.work, filepath.Join(rel, ".gitconfig")))
	write(t, filepath.Join(e.work, ".gitconfig"), "[user]\n\temail = host-work@example.org\n")
	write(t, filepath.Join(e.work, ".gitexcludes"), "# the user's\n")
	repo1 := filepath.Join(e.work, "repo1")
	os.Mkdir(repo1, 0o755)
	git(t, repo1, "init", "-q")
	write(t, filepath.Join(repo1, "a"), "a\n")
	git(t, repo1, "add", "a")
	git(t, repo1, "commit", "-q", "-m", "a")
	userGit := func(dir string, args ...string) string {
		c := exec.Command("git", args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "HOME="+e.home, "XDG_CONFIG_HOME="+cfg, "GIT_CONFIG_NOSYSTEM=1")
		b, _ := c.CombinedOutput()
		return string(b)
	}
	if got := strings.TrimSpace(userGit(repo1, "config", "user.email")); got != "host-work@example.org" {
		t.Fatalf("the host's git does not read the included file (the test would prove nothing): user.email %q", got)
	}
	mark, touch := e.marker("fsmonitor-user-include")
	out := e.boxPlant(fmt.Sprintf(`printf '[core]\n\tfsmonitor = "%s; false"\n' >> .gitconfig
echo evil.go >> .gitexcludes
echo 'package main' > repo1/evil.go
mkdir -p .tmpl/hooks && printf '#!/bin/sh\ntrue\n' > .tmpl/hooks/post-checkout
grep -q fsmonitor .gitconfig && grep -q evil.go .gitexcludes && echo planted`, touch))
	requirePlanted(t, out)
	gs := userGit(repo1, "status", "--porcelain")
	notRun(t, mark, "the host's git status in repo1, with the user's configuration:\n"+gs, out)
	if !strings.Contains(gs, "evil.go") {
		t.Errorf("the box's line in the user's core.excludesFile hid its new file from the host's git status:\n%s", gs)
	}
	if _, err := os.Lstat(filepath.Join(e.work, ".tmpl", "hooks", "post-checkout")); err == nil {
		t.Errorf("the box's hook in the user's init.templateDir reached the host")
	}
}

// TestAttackRerereResolution (review 14, F15): branches main and feature both change the
// Makefile's line; feature is checked out. A box merges main with rerere enabled, writes its own
// resolution of the conflict with a line of its own, records it (git rerere) and aborts the
// merge: the work tree, the index and git status are as before. Before, the host's next merge
// of main with the user's rerere.enabled said "Resolved 'Makefile' using previous resolution."
// and wrote the box's line. The entry the box recorded is moved aside at exit, with a note.
func TestAttackRerereResolution(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	mk := filepath.Join(e.work, "Makefile")
	write(t, mk, "all:\n\t@echo v1\n")
	git(t, e.work, "add", "Makefile")
	git(t, e.work, "commit", "-q", "-m", "make")
	git(t, e.work, "checkout", "-q", "-b", "feature")
	write(t, mk, "all:\n\t@echo feature\n")
	git(t, e.work, "commit", "-q", "-am", "feature")
	git(t, e.work, "checkout", "-q", "main")
	write(t, mk, "all:\n\t@echo main\n")
	git(t, e.work, "commit", "-q", "-am", "main")
	git(t, e.work, "checkout", "-q", "feature")
	out := e.boxPlant(boxGit + ` -c rerere.enabled=true merge main 2>&1; echo "merge: $?"
printf 'all:\n\t@echo feature main\n\t@echo BOXCODE\n' > Makefile
` + boxGit + ` -c rerere.enabled=true rerere; echo "rerere: $?"; git merge --abort; echo "abort: $?"; ls -A .git/rr-cache | grep -q . && echo planted`)
	if !strings.Contains(out, "planted") {
		t.Fatalf("the box recorded no resolution (the test would prove nothing):\n%s", out)
	}
	if st, _ := hostGit(e.work, "status", "--porcelain"); st != "" {
		t.Fatalf("the box's merge left a trace in git status (the test would prove less): %q", st)
	}
	m, err := hostGit(e.work, "-c", "rerere.enabled=true", "merge", "main")
	if b, _ := os.ReadFile(mk); strings.Contains(string(b), "BOXCODE") {
		t.Errorf("the host's merge with rerere.enabled applied the box's resolution (%v):\n%s\nMakefile:\n%s", err, m, b)
	}
	l := e.lastLaunch()
	found := false
	for _, ev := range l.DriftEvents {
		if strings.Contains(ev.Path, "/.git/rr-cache/") && strings.Contains(ev.Detail, "rerere") && strings.Contains(ev.Detail, "moved aside to") {
			found = true
		}
	}
	if !l.Drift || !found {
		t.Errorf("the box's rr-cache entry is not recorded as moved aside: drift %v %+v", l.Drift, l.DriftEvents)
	}
}
