package shim

import "golang.org/x/sys/unix"

// killInNamespace sends SIGKILL to pid if it is still a process of pid namespace ino. It goes
// through a pidfd so that a pid reused meanwhile is never signalled.
func killInNamespace(pid int, ino uint64) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if got, err := nsInode(pid, "pid"); err != nil || got != ino {
		return
	}
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}
