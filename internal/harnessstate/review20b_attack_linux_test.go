package harnessstate

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestAttackClaudeConfigSwappedByRunningBox (review 20b): since 648cf80 the box-owned
// ~/.claude/.claude.json is a plain file of the state folder ~/.claude, bound read-write as a
// whole into every box of the workspace that runs (before, it was a mount point there, which
// no box could remove or replace: EBUSY). A running box of the workspace can therefore put a
// FIFO (or a folder) in its place at any moment, and Prepare, for the next launch of the
// workspace, checks the kind first (Lstat, removed when not a regular file) and only then opens
// it to write (writeFile: O_NOFOLLOW|O_NONBLOCK, refused when not a regular file). The loop
// below does what `while :; do rm -f ~/.claude/.claude.json; mkfifo ~/.claude/.claude.json;
// done` does in a running box (the same folder, the same rights; a stand-in for the box, not a
// real one). Want: a later launch is prepared (the file made again) whatever a running box
// leaves there; got: Prepare fails, so the launch fails, for as long as the box runs.
func TestAttackClaudeConfigSwappedByRunningBox(t *testing.T) {
	const ws = "/w"
	p, home, dir := builtinState(t, "claude", ws)
	if _, err := Prepare(dir, p, home, ws); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, ".claude", ".claude.json")
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			os.Remove(target)
			syscall.Mkfifo(target, 0o600)
		}
	}()
	const tries = 40
	failed := 0
	var last error
	for range tries {
		if _, err := Prepare(dir, p, home, ws); err != nil {
			failed++
			last = err
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	<-done
	t.Logf("%d of %d launches' Prepare failed while the stand-in box swapped the file; last: %v", failed, tries, last)
	if failed > 0 {
		t.Errorf("a running box of the workspace made %d of %d later launches fail (Prepare: %v): the box-owned ~/.claude/.claude.json is no longer a mount point in a running box, and Prepare does not make it again when a box swaps it between its check and its write", failed, tries, last)
	}
}
