package relay

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestCredentialCommandTimeoutKillsItsChildren: a credential command that leaves a child holding
// its output (here a shell running sleep) fails at its timeout, and the next Get runs again,
// instead of both blocking until the child exits (review finding F4: every relay request for the
// provider hung behind the lock). The child is killed with its group.
func TestCredentialCommandTimeoutKillsItsChildren(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	script := filepath.Join(dir, "helper")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 30 &\necho $! > "+pidFile+"\nwait\necho key\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := NewCredentialSource(Credential{Key: "x.credential", Command: []string{script}, Timeout: 300 * time.Millisecond})
	for i := range 2 {
		done := make(chan error, 1)
		go func() { _, err := s.Get(t.Context()); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "did not finish within") {
				t.Fatalf("Get #%d: want the timeout error, got %v", i+1, err)
			}
		case <-time.After(20 * time.Second): // a hang guard, not a timing assertion
			t.Fatalf("Get #%d still blocked: the helper's child kept the run waiting", i+1)
		}
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && !testenv.IsZombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the helper's child %d still runs after the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
