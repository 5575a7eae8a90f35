// Package pty allocates a box's terminal in the box's own devpts instance (/dev/ptmx): the
// master goes to the shim, the slave is the program's controlling terminal.
package pty

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Open allocates a PTY from /dev/ptmx and returns its master and slave (both close-on-exec),
// the slave sized rows×cols when both are set. The slave is opened from the master
// (TIOCGPTPEER: no path lookup, so it is the master's own peer whatever /dev/pts holds).
func Open(rows, cols uint16) (master, slave int, err error) {
	master, err = unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(master)
		return -1, -1, fmt.Errorf("unlock pty: %w", err)
	}
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		unix.Close(master)
		return -1, -1, fmt.Errorf("open pty slave: %w", errno)
	}
	slave = int(fd)
	if rows > 0 && cols > 0 {
		if err := unix.IoctlSetWinsize(slave, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
			unix.Close(slave)
			unix.Close(master)
			return -1, -1, fmt.Errorf("set pty size: %w", err)
		}
	}
	return master, slave, nil
}
