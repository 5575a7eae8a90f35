package integrity

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
// and whose folder the launch removed, its record left (what a box's git worktree remove
// leaves, the record's files being pinned), is an alert at exit that names the host's git
// worktree prune; so is one whose parent folder went with it. Not reported: a worktree left
// as it was, a locked one, one whose folder stays with its .git alone removed (git worktree
// prune would drop its index, HEAD and reflog: review 30), and the same stale records at the
// next launch, which removed nothing (review 30: reported again at every launch).
func TestWorktreeRecordLeft(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	git := func(t *testing.T, dir string, args ...string) string { return gitOK(t, dir, "", args...) }
	git(t, ws, "init", "-q", "-b", "main", ws)
	mustWrite(t, filepath.Join(ws, "main.go"), "package main\n")
	git(t, ws, "add", "-A")
	git(t, ws, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "initial")
	wts := map[string]string{ // record name → work tree
		"gone": ".worktrees/gone", "kept": ".worktrees/kept", "locked": ".worktrees/locked",
		"dotgit": ".worktrees/dotgit", "deep": "nested/deep/deep",
	}
	for _, n := range slices.Sorted(maps.Keys(wts)) {
		git(t, ws, "worktree", "add", "-q", filepath.Join(ws, wts[n]))
	}
	git(t, ws, "worktree", "lock", filepath.Join(ws, wts["locked"]))
	admin := func(n string) string { return filepath.Join(ws, ".git", "worktrees", n) }

	s := Snapshot(resolveWS(t, ws), Limits{})
	for _, p := range []string{wts["gone"], wts["locked"], wts["dotgit"] + "/.git", "nested"} {
		if err := os.RemoveAll(filepath.Join(ws, p)); err != nil {
			t.Fatal(err)
		}
	}
	ts := s.VerifyExit()
	for _, n := range []string{"gone", "deep"} {
		if got := worktreeRecordAlerts(ts, admin(n)); len(got) != 1 || !got[0].Alert || !strings.Contains(got[0].Detail, wts[n]) {
			t.Errorf("the record of the removed worktree %s: %+v; want one alert naming it and git worktree prune (all: %+v)", wts[n], got, ts)
		}
	}
	for _, n := range []string{"kept", "locked", "dotgit"} {
		if got := worktreeRecordAlerts(ts, admin(n)); len(got) != 0 {
			t.Errorf("the record of %s is reported: %+v", n, got)
		}
	}
	// The next launch finds the same stale records, and removes nothing.
	if got := worktreeRecordAlerts(Snapshot(resolveWS(t, ws), Limits{}).VerifyExit(), admin("gone")); len(got) != 0 {
		t.Errorf("a record left before the launch is reported again: %+v", got)
	}
	// What the alert says to run finishes it.
	git(t, ws, "worktree", "prune")
	if _, err := os.Lstat(admin("gone")); !os.IsNotExist(err) {
		t.Errorf("git worktree prune left the record: %v", err)
	}
}
