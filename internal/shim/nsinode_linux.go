package shim

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// nsInode returns the inode number of namespace name ("pid", "user", …) of process pid.
func nsInode(pid int, name string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, name), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
