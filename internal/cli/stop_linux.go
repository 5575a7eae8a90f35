package cli

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// errProcessGone is returned by stopProcess when the process had already exited.
var errProcessGone = errors.New("the process has exited")

// stopProcess sends SIGTERM to pid and waits until it has exited, or for timeout. The process
// is pinned by a pidfd first, and verify must then confirm it is the one meant: a pid number
// read from a file may since belong to another process, and the pidfd keeps the signal from
// reaching another that takes the number later.
func stopProcess(pid int, verify func() error, timeout time.Duration) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return errProcessGone
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if err := verify(); err != nil {
		return err
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return errProcessGone
		}
		return fmt.Errorf("signal %d: %w", pid, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("process %d did not exit within %v of SIGTERM", pid, timeout)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("wait for %d: %w", pid, err)
		}
		if n > 0 {
			return nil
		}
	}
}
