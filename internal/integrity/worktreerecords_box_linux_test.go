package integrity_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBoxRemovesHostWorktree: a linked worktree beneath the workspace made before the launch
// (Claude Code's `claude -w` makes them in .claude/worktrees) and removed in a box with git
// worktree remove, as an agent ends such a worktree in a later session. Its record's commondir
// and gitdir are pinned while the box runs, so the box's git deletes the work tree and fails
// on the record; the host's git then lists the worktree as prunable. `agentbox run` says so at
// its end, naming the host's command that finishes it (before, nothing was said), and that
// command does.
func TestBoxRemovesHostWorktree(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	write(t, filepath.Join(e.work, ".gitignore"), ".claude/worktrees/\n")
	git(t, e.work, "add", ".gitignore")
	git(t, e.work, "commit", "-q", "-m", "ignore worktrees")
	git(t, e.work, "worktree", "add", "-q", "-b", "feature", filepath.Join(e.work, ".claude", "worktrees", "feature"))
	out := e.boxPlant(`git worktree remove .claude/worktrees/feature; echo "remove: $?"`)
	if !strings.Contains(out, "Device or resource busy") || strings.Contains(out, "remove: 0") {
		t.Fatalf("the box's git worktree remove of a worktree made before the launch: want it to fail on the pinned record (else this test proves nothing):\n%s", out)
	}
	admin := filepath.Join(e.work, ".git", "worktrees", "feature")
	if _, err := os.Lstat(admin); err != nil {
		t.Fatalf("the record after the box: %v", err)
	}
	l := e.lastLaunch()
	if d := eventDetail(l, "/.git/worktrees/feature"); !strings.Contains(d, ".claude/worktrees/feature") || !strings.Contains(d, "git worktree prune") {
		t.Errorf("the launch's alerts do not name the worktree and git worktree prune: %+v", l.DriftEvents)
	}
	if !strings.Contains(out, "integrity alert") || !strings.Contains(out, "git worktree prune") {
		t.Errorf("agentbox run did not say at its end how to finish the removal:\n%s", out)
	}
	if list, err := hostGit(e.work, "worktree", "list", "--porcelain"); err != nil || !strings.Contains(list, "prunable") {
		t.Errorf("the host's git worktree list (%v): %s; want the worktree prunable", err, list)
	}
	if o, err := hostGit(e.work, "worktree", "prune"); err != nil {
		t.Fatalf("the host's git worktree prune: %v\n%s", err, o)
	}
	if list, _ := hostGit(e.work, "worktree", "list", "--porcelain"); strings.Contains(list, "feature") {
		t.Errorf("git worktree prune left the worktree listed: %s", list)
	}
	if st, err := hostGit(e.work, "status", "--porcelain"); err != nil || st != "" {
		t.Errorf("the host's git status after the prune (%v): %q", err, st)
	}
}
