//go:build linux

package integrity

import (
	"io/fs"
	"os"
	"syscall"
)

// identity returns a file's device, inode and ctime (ns).
func identity(fi fs.FileInfo) (dev, ino uint64, ctime int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0
	}
	return uint64(st.Dev), st.Ino, st.Ctim.Nano()
}

// openNoFollow opens a regular file for reading without following a final symlink and
// without blocking on a FIFO.
func openNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, errNotRegular
	}
	return f, nil
}

// searchable reports whether access(path, X_OK) succeeds, following symlinks: what git's
// is_git_directory asks of objects/ and refs/ (a folder the user may search, or a file the
// user may run).
func searchable(path string) bool { return syscall.Access(path, 1) == nil } // X_OK
