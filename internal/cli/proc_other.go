//go:build !unix

package cli

import (
	"errors"
	"syscall"
)

func detachedAttr() *syscall.SysProcAttr { return nil }

func terminate(pid int) error { return errors.New("not supported on this platform") }
