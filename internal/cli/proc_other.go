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
