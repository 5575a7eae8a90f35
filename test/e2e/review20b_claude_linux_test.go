package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttackClaudeConfigSwappedByRunningBox (review 20b): since 648cf80 the box-owned
// ~/.claude/.claude.json is a plain file of the state folder ~/.claude, which every box of the
// workspace that runs has bound read-write as a whole (before, it was a file bound on its own,
// a mount point no box could remove or replace). A running box of the claude profile (a
// stand-in named claude) puts a FIFO in its place again and again; the daemon's preparation of
// the next launch of the workspace (harnessstate.Prepare) checks the file's kind and then
// opens it to write (O_NONBLOCK: ENXIO on a FIFO with no reader), and the launch fails. Want:
// every later launch of the workspace starts while the box runs.
func TestAttackClaudeConfigSwappedByRunningBox(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3 for the box's loop")
	}
	e := standInEnv(t)
	bin := filepath.Join(e.Root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
if mv attack attacking 2>/dev/null; then
  f="$HOME/.claude/.claude.json"
  exec python3 -c '
import os, sys, time
f, n, end = sys.argv[1], 0, time.time() + 60
while not os.path.exists("stop") and time.time() < end:
    try: os.unlink(f)
    except OSError: pass
    try: os.mkfifo(f)
    except OSError: pass
    n += 1
print("swapped", n, "times")' "$f"
fi
echo started-B
`
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// A first launch makes the state folder.
	if r := e.Run("", "run", filepath.Join(bin, "claude")); r.Code != 0 || !strings.Contains(r.Stdout, "started-B") {
		t.Fatalf("the first launch: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if err := os.WriteFile(filepath.Join(e.Work, "attack"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan Result, 1)
	go func() { done <- e.Run("", "run", filepath.Join(bin, "claude")) }()
	state := claudeStateConfig(t, e)
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if fi, err := os.Lstat(state); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			break
		}
		if time.Now().After(end) {
			os.WriteFile(filepath.Join(e.Work, "stop"), nil, 0o644)
			t.Fatalf("the attacking box never put a FIFO at %s (the test would prove nothing)", state)
		}
	}
	const tries = 12
	failed, last := 0, ""
	for range tries {
		r := e.Run("", "run", filepath.Join(bin, "claude"))
		if r.Code != 0 || !strings.Contains(r.Stdout, "started-B") {
			failed++
			last = r.Stderr
		}
	}
	os.WriteFile(filepath.Join(e.Work, "stop"), nil, 0o644)
	a := <-done
	t.Logf("the attacking box: exit %d, %s; %d of %d later launches failed; last stderr: %s", a.Code, strings.TrimSpace(a.Stdout), failed, tries, last)
	if failed > 0 {
		t.Errorf("a running box of the workspace made %d of %d later launches of it fail (the box-owned ~/.claude/.claude.json swapped for a FIFO between Prepare's check and its write):\n%s", failed, tries, last)
	}
}
