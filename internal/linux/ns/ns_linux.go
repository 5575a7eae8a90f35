package ns

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Inodes returns the inode numbers of pid's namespaces by kind (see Kinds). For a box, pass
// its PID 1 (engine.Box.NamespacePid): read it right after Start, while the box runs.
func Inodes(pid int) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, k := range Kinds {
		ino, err := Inode(pid, k)
		if err != nil {
			return nil, err
		}
		out[k] = ino
	}
	return out, nil
}

// Inode returns the inode number of pid's namespace of kind ("pid", "user", …; see Kinds).
func Inode(pid int, kind string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, kind), &st); err != nil {
		return 0, fmt.Errorf("namespace %s of %d: %w", kind, pid, err)
	}
	return st.Ino, nil
}

// Remaining lists the host pids of processes in the pid namespace with inode pidNS (see
// Inode), zombies included: a process remains until it is gone from /proc. Processes
// the caller may not inspect are skipped; the shim, as the owner of the box's user namespace,
// may inspect every process of its box.
func Remaining(pidNS uint64) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("scan /proc: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat("/proc/"+e.Name()+"/ns/pid", &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				continue
			}
			return nil, fmt.Errorf("scan /proc/%d: %w", pid, err)
		}
		if st.Ino == pidNS {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// InnermostPid returns pid's pid in its own (innermost) pid namespace, the last NSpid field
// of /proc/PID/status, or 0 when that cannot be read: 1 for the init of a box's pid namespace.
func InnermostPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.Atoi(f[len(f)-1])
				return n
			}
		}
	}
	return 0
}

// Settled reports whether no process of the pid namespace with inode pidNS remains. The shim
// calls it after the box's top process has exited, to verify the box's end.
func Settled(pidNS uint64) (bool, error) {
	pids, err := Remaining(pidNS)
	return len(pids) == 0 && err == nil, err
}
