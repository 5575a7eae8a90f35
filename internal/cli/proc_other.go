//go:build !unix

package cli

import (
	"errors"
	"syscall"
	"time"
)

func detachedAttr() *syscall.SysProcAttr { return nil }

func stopProcess(pid int, verify func() error, timeout time.Duration) error {
	return errors.New("not supported on this platform")
}

var errProcessGone = errors.New("the process has exited")

// syscallNoFollow is 0 where the system has no O_NOFOLLOW (no change is kept there).
const syscallNoFollow = 0
