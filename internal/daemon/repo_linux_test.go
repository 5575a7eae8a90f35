package daemon

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestRepoTopBoundedGitFile guards review 12, F3: a box can leave a .git file of any size in a
// subfolder, and repoTop (run for every launch, from the caller's folder) read it whole. A
// sparse 64 MiB .git whose first line points inside the workspace must be looked at without the
// daemon allocating its size; git refuses a .git file over 1 MiB ("too large to be a .git
// file"), and so does ReadGitdir since review 13 (it reads .git files as git does), so the
// walk goes on to the repository above.
func TestRepoTopBoundedGitFile(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(ws, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	g := filepath.Join(big, ".git")
	if err := os.WriteFile(g, []byte("gitdir: ../.git\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	if err := os.Truncate(g, size); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	top := repoTop(big)
	runtime.ReadMemStats(&after)
	if top != ws {
		t.Errorf("repoTop(%s) = %q, want %q (a .git file over 1 MiB is none to git)", big, top, ws)
	}
	if err := os.WriteFile(g, []byte("gitdir: ../.git\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if top := repoTop(big); top != big {
		t.Errorf("repoTop(%s) = %q, want %q (a .git file with a gitdir line)", big, top, big)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("repoTop allocated %d bytes for a %d-byte .git file: it must read a bounded prefix", got, size)
	}
	// Without "gitdir: " at its start, the file is no worktree's: the walk goes on to the
	// repository above.
	if err := os.WriteFile(g, append(make([]byte, 8192), "gitdir: ../.git\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if top := repoTop(big); top != ws {
		t.Errorf("repoTop(%s) with a .git file whose gitdir line does not start it = %q, want %q", big, top, ws)
	}
}

// TestRepoTopGitFIFO: a .git that is a FIFO (a box can swap one in between the daemon's Lstat
// and its open) must not block the launch; repoTop goes on to the repository above.
func TestRepoTopGitFIFO(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(ws, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(sub, ".git")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() { done <- repoTop(sub) }()
	select {
	case top := <-done:
		if top != ws {
			t.Errorf("repoTop(%s) with a FIFO .git = %q, want %q", sub, top, ws)
		}
	case <-time.After(10 * time.Second):
		// Unblock the reader so that the test ends, then fail.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("repoTop blocked on a .git FIFO: it must open .git with O_NONBLOCK")
	}
}
