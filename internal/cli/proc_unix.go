//go:build unix

package cli

import "syscall"

// detachedAttr starts a process in its own session, with no controlling terminal.
func detachedAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// syscallNoFollow makes an open fail on a symlink at the path's end.
const syscallNoFollow = syscall.O_NOFOLLOW
