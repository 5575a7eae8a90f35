//go:build unix && !linux

package cli

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

var errProcessGone = errors.New("the process has exited")

// stopProcess sends SIGTERM to pid and waits until it has exited, or for timeout (no pidfd
// here: the pid is signalled by number after verify).
func stopProcess(pid int, verify func() error, timeout time.Duration) error {
	if err := verify(); err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return errProcessGone
		}
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
	}
	return fmt.Errorf("process %d did not exit within %v of SIGTERM", pid, timeout)
}
