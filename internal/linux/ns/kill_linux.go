package ns

import (
	"os"
	"strconv"

	"github.com/agentbox/agentbox/internal/linux/proc"
	"golang.org/x/sys/unix"
)

// OthersLeft reports whether a live process other than PID 1 is left in the caller's pid
// namespace (a zombie creates nothing). Box-init, PID 1 of its box, asks it before it acts on
// what the box's processes may have left. /proc lists a process by its thread group's leader,
// which is a zombie as soon as that thread has exited, while the group's other threads may
// still run (a leader that exited alone, exit(2); or a process being killed, whose threads die
// one by one): a zombie's threads are looked at too, and any of them not a zombie is left.
func OthersLeft() bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != 1 {
			if st, err := proc.State(pid); err == nil && (st != 'Z' || threadsLeft(pid)) {
				return true
			}
		}
	}
	return false
}

// threadsLeft reports whether a thread of process pid other than its leader is not a zombie.
func threadsLeft(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return false // gone
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil && tid != pid {
			if st, err := proc.State(tid); err == nil && st != 'Z' && st != 'X' {
				return true
			}
		}
	}
	return false
}

// Kill sends SIGKILL to pid if it is still a process of the pid namespace with inode pidNS
// (which the caller holds open, so that its number is not reused). It goes through a pidfd, so
// that a pid reused meanwhile is never signalled.
func Kill(pid int, pidNS uint64) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if got, err := Inode(pid, "pid"); err != nil || got != pidNS {
		return
	}
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}
