package integrity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// worktreeRecordAlerts returns the transitions of ts about the worktree record admin.
func worktreeRecordAlerts(ts []Transition, admin string) []Transition {
	var out []Transition
	for _, tr := range ts {
		if tr.Path == admin && strings.Contains(tr.Detail, "git worktree prune") {
			out = append(out, tr)
		}
	}
	return out
}

// TestWorktreeRecordLeft: a linked worktree beneath the workspace that existed at the snapshot
// and whose work tree the launch removed, its record left (what a box's git worktree remove
// leaves, the record's files being pinned), is an alert at exit that names the host's git
// worktree prune; a worktree left as it was, a locked one, and the same stale record at the
// next launch (which removed nothing) are not.
func TestWorktreeRecordLeft(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(t *testing.T, dir string, args ...string) string { return gitOK(t, dir, "", args...) }
	git(t, ws, "init", "-q", "-b", "main", ws)
	mustWrite(t, filepath.Join(ws, "main.go"), "package main\n")
	git(t, ws, "add", "-A")
	git(t, ws, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "initial")
	for _, n := range []string{"gone", "kept", "locked"} {
		git(t, ws, "worktree", "add", "-q", filepath.Join(ws, ".worktrees", n))
	}
	git(t, ws, "worktree", "lock", filepath.Join(ws, ".worktrees", "locked"))
	admin := func(n string) string { return filepath.Join(ws, ".git", "worktrees", n) }

	s := Snapshot(resolveWS(t, ws), Limits{})
	for _, n := range []string{"gone", "locked"} {
		if err := os.RemoveAll(filepath.Join(ws, ".worktrees", n)); err != nil {
			t.Fatal(err)
		}
	}
	ts := s.VerifyExit()
	if got := worktreeRecordAlerts(ts, admin("gone")); len(got) != 1 || !got[0].Alert || !strings.Contains(got[0].Detail, ".worktrees/gone") {
		t.Errorf("the record of the removed worktree: %+v; want one alert naming .worktrees/gone and git worktree prune (all: %+v)", got, ts)
	}
	for _, n := range []string{"kept", "locked"} {
		if got := worktreeRecordAlerts(ts, admin(n)); len(got) != 0 {
			t.Errorf("the record of %s is reported: %+v", n, got)
		}
	}
	// The next launch finds the same stale record, and removes nothing. (It begins a coarse
	// clock's tick after the removal at the earliest: ctimeLag.)
	time.Sleep(2 * ctimeLag)
	if got := worktreeRecordAlerts(Snapshot(resolveWS(t, ws), Limits{}).VerifyExit(), admin("gone")); len(got) != 0 {
		t.Errorf("a record left before the launch is reported again: %+v", got)
	}
	// What the alert says to run finishes it.
	git(t, ws, "worktree", "prune")
	if _, err := os.Lstat(admin("gone")); !os.IsNotExist(err) {
		t.Errorf("git worktree prune left the record: %v", err)
	}
}
