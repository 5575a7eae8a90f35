package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// stat returns the fields of /proc/<pid>/stat after the command name (from the state, field
// 3, on). The error of reading the file is returned as it is.
func stat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name may hold spaces and parentheses: split after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("%w: no end of the command name", ErrMalformed)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return nil, fmt.Errorf("%w: %d fields", ErrMalformed, len(f))
	}
	return f, nil
}

// State returns pid's state letter, field 3 of /proc/<pid>/stat: R running, S sleeping, D in
// uninterruptible sleep, T stopped, Z a zombie, …. An error reading the file is returned as it
// is (fs.ErrNotExist once the pid is gone; fs.ErrPermission where /proc hides it).
func State(pid int) (byte, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	return f[0][0], nil
}

// Parent returns pid's parent process id (field 4 of /proc/<pid>/stat; 0 for a process whose
// parent is outside its pid namespace).
func Parent(pid int) (int, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	pp, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, fmt.Errorf("%w: ppid %q", ErrMalformed, f[1])
	}
	return pp, nil
}

// CPUTicks returns the CPU time pid has spent, user and system (fields 14 and 15), in clock
// ticks (USER_HZ, 100 a second on Linux).
func CPUTicks(pid int) (uint64, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	ut, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: utime %q", ErrMalformed, f[11])
	}
	st, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: stime %q", ErrMalformed, f[12])
	}
	return ut + st, nil
}

// ReadMachineCPU reads the CPU time (MachineCPU) of the CPUs this process may run on (its
// affinity: a daemon pinned to some CPUs counts those) from /proc/stat; all of them when the
// affinity cannot be read.
func ReadMachineCPU() (MachineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return MachineCPU{}, err
	}
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return parseMachineCPU(string(b), nil)
	}
	return parseMachineCPU(string(b), set.IsSet)
}

// parseMachineCPU is ReadMachineCPU on the text of /proc/stat, counting the cpuN lines whose N
// allowed accepts (every one when allowed is nil).
func parseMachineCPU(s string, allowed func(int) bool) (MachineCPU, error) {
	var m MachineCPU
	seenAll := false
	for line := range strings.SplitSeq(s, "\n") {
		name, rest, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(name, "cpu") {
			break
		}
		if name == "cpu" {
			seenAll = true
			continue
		}
		n, err := strconv.Atoi(name[len("cpu"):])
		if err != nil {
			return MachineCPU{}, fmt.Errorf("%w: /proc/stat line %q", ErrMalformed, name)
		}
		if allowed != nil && !allowed(n) {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 8 {
			return MachineCPU{}, fmt.Errorf("%w: /proc/stat's %s line has %d fields", ErrMalformed, name, len(f))
		}
		// user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is in user's.
		for i, v := range f[:8] {
			t, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return MachineCPU{}, fmt.Errorf("%w: /proc/stat's %s line, field %d: %q", ErrMalformed, name, i+1, v)
			}
			m.Total += t
			if i == 3 || i == 4 {
				m.Idle += t
			}
		}
		m.CPUs++
	}
	if !seenAll || m.CPUs == 0 {
		return MachineCPU{}, fmt.Errorf("%w: no cpu lines in /proc/stat", ErrMalformed)
	}
	return m, nil
}

// StartTime returns the start time of pid in clock ticks since boot, which together with the
// pid names one process.
func StartTime(pid int) (uint64, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Same reports whether pid is still the process that started at start: alive, or a zombie not
// yet reaped (Ended tells them apart). A pidfd pins the pid while the start time is compared,
// so a recycled pid never matches.
func Same(pid int, start uint64) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	got, err := StartTime(pid)
	return err == nil && got == start && unix.PidfdSendSignal(fd, 0, nil, 0) == nil
}

// Ended reports whether pid has ended: it is gone, or a zombie (or dead) not yet reaped.
func Ended(pid int) bool {
	f, err := stat(pid)
	return err != nil || f[0] == "Z" || f[0] == "X"
}

// WaitEnded waits until pid has ended (as Ended says), at most max, and reports whether it
// has. It sleeps in poll(2) on a pidfd of the process, which the kernel makes readable when
// the process exits, rather than reading /proc again and again; where no pidfd can be opened
// for the process it reads /proc every 5 ms. Like Ended it names the process by its pid only:
// for a process whose pid may have been reused, compare its start time first (Same).
func WaitEnded(pid int, max time.Duration) bool {
	deadline := time.Now().Add(max)
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	if err == nil {
		defer unix.Close(fd)
		switch ended, err := pollPidfd(fd, deadline); {
		case err == nil && !ended:
			return Ended(pid)
		case err == nil:
			return true
		}
	}
	for time.Now().Before(deadline) {
		if Ended(pid) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return Ended(pid)
}

// WaitPidfd waits until the process of pidfd fd has exited (a zombie, or reaped), at most max,
// and reports whether it has. A signal that interrupts the wait (EINTR: the Go runtime's own,
// SIGCHLD of an ended child) does not end it, as it ended a single poll(2): readiness's reclaim
// then took a box's PID 1, killed 49 ms before, for one that survives SIGKILL.
func WaitPidfd(fd int, max time.Duration) bool {
	ended, _ := pollPidfd(fd, time.Now().Add(max))
	return ended
}

// pollPidfd waits until pidfd fd is readable (its process has exited) or deadline, and
// reports whether it is; an error other than EINTR ends the wait.
func pollPidfd(fd int, deadline time.Time) (bool, error) {
	for {
		left := time.Until(deadline)
		ms := 0
		if left > 0 {
			ms = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, err
		}
		if n > 0 {
			return true, nil
		}
		if left <= 0 {
			return false, nil
		}
	}
}

// Handle is a process held by a pidfd, opened while the caller knows the pid to be the
// process it means: its end can be waited for later, though the pid be reused meanwhile.
type Handle struct{ fd int }

// OpenIn returns a handle on process pid, which must be a live process whose pid namespace
// (/proc/<pid>/ns/pid) has inode pidNS: a pid reused by a process elsewhere is refused.
func OpenIn(pid int, pidNS uint64) (*Handle, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	var st unix.Stat_t
	err = unix.Stat(fmt.Sprintf("/proc/%d/ns/pid", pid), &st)
	// Read while the pidfd's process is alive, /proc/<pid> was that process.
	if err == nil && (st.Ino != pidNS || unix.PidfdSendSignal(fd, 0, nil, 0) != nil) {
		err = fmt.Errorf("process %d is not in pid namespace %d, or has ended", pid, pidNS)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Handle{fd: fd}, nil
}

// Wait waits until the process has exited (a zombie, or reaped), at most max, and reports
// whether it has. A nil handle has nothing to wait for: true.
func (h *Handle) Wait(max time.Duration) bool {
	if h == nil {
		return true
	}
	return WaitPidfd(h.fd, max)
}

// Close releases the handle (nil: nothing to release).
func (h *Handle) Close() {
	if h != nil && h.fd >= 0 {
		unix.Close(h.fd)
		h.fd = -1
	}
}
