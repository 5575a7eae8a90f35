package daemon

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// rotateLog moves path to path.1 and makes a new empty path (0600) the file of each descriptor
// of fds, when the first of fds is path itself (same device and inode) and it holds more than
// max bytes. It reports whether it did.
func rotateLog(path string, fds []int, max int64) (bool, error) {
	var fst, pst unix.Stat_t
	if err := unix.Fstat(fds[0], &fst); err != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil
	}
	if err := unix.Stat(path, &pst); err != nil || pst.Dev != fst.Dev || pst.Ino != fst.Ino || fst.Size <= max {
		return false, nil
	}
	if err := os.Rename(path, path+".1"); err != nil {
		return false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		return false, fmt.Errorf("a new log after moving the old one to %s.1: %w", path, err)
	}
	defer f.Close()
	for _, fd := range fds {
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			return false, fmt.Errorf("make %s descriptor %d: %w", path, fd, err)
		}
	}
	return true, nil
}
