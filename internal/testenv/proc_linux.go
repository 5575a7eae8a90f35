package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/linux/proc"
)

// IsZombie reports whether process pid has exited (a zombie, or no longer listed in /proc).
func IsZombie(pid int) bool {
	st, err := proc.State(pid)
	return err != nil || st == 'Z'
}

// KillStaleDaemon SIGKILLs pid, read from a test environment's daemon.pid after `agentbox
// daemon stop`, only while it is still an agentbox daemon whose runtime directory is runtime
// (XDG_RUNTIME_DIR in its environment): a daemon killed earlier leaves its pid file behind, and
// with pid_max at 32,768 a CI run wraps the pids, so the number may name any process by then
// (as root, a real claude of a parallel test was once SIGKILLed so). The process is pinned by a
// pidfd before it is looked at, so the signal reaches the process checked.
func KillStaleDaemon(pid int, runtime string) {
	if pid <= 0 {
		return
	}
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(pfd)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(string(cmdline), "\x00")
	if err != nil || len(args) < 2 || !strings.HasPrefix(filepath.Base(args[0]), "agentbox") || args[1] != "daemon" {
		return
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil || !slices.Contains(strings.Split(string(environ), "\x00"), "XDG_RUNTIME_DIR="+runtime) {
		return
	}
	unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
}

// KillAtCleanup SIGKILLs process pid when t ends, if it still runs then. The process is pinned
// by a pidfd now, while the caller knows it runs: a pid kept until a test's cleanup may name
// another process by then (the process ended, the pids wrapped), and a plain kill(2) of it
// SIGKILLed a real claude of a parallel test in two CI runs (integrity
// TestLostLaunchWorkFolders killed its box's pid at cleanup, the box having ended long before).
func KillAtCleanup(t testing.TB, pid int) {
	if pid <= 0 {
		return
	}
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // already gone
	}
	t.Cleanup(func() {
		unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
		unix.Close(pfd)
	})
}
