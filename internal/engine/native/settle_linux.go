package native

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// NamespaceKinds are the namespaces Namespaces reports, as named under /proc/<pid>/ns.
var NamespaceKinds = []string{"cgroup", "ipc", "mnt", "net", "pid", "user", "uts"}

// Namespaces returns the inode numbers of pid's namespaces by kind (see NamespaceKinds). For a
// box, pass its top process (engine.Box.Process.Pid, which is box-init): read it right after
// Start, while box-init runs.
func Namespaces(pid int) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, k := range NamespaceKinds {
		var st unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, k), &st); err != nil {
			return nil, fmt.Errorf("namespace %s of %d: %w", k, pid, err)
		}
		out[k] = st.Ino
	}
	return out, nil
}

// PidNamespace returns the inode number of pid's pid namespace.
func PidNamespace(pid int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/pid", pid), &st); err != nil {
		return 0, fmt.Errorf("pid namespace of %d: %w", pid, err)
	}
	return st.Ino, nil
}

// Remaining lists the host pids of processes in the pid namespace with inode pidNS (see
// PidNamespace), zombies included: a process remains until it is gone from /proc. Processes
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

// Settled reports whether no process of the pid namespace with inode pidNS remains. The shim
// calls it after the box's top process has exited, to verify the box's end.
func Settled(pidNS uint64) (bool, error) {
	pids, err := Remaining(pidNS)
	return len(pids) == 0 && err == nil, err
}
