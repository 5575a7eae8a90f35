package integrity

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"syscall"
)

// Reading what a box may have written: folders it may have made unlistable, files of any size
// or kind.

// readDirNames returns the sorted names in dir.
func readDirNames(dir string) ([]string, error) {
	ents, err := readDirOwned(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// readDirOwned lists dir; when that is refused (a box made the folder 0311: its owner may
// enter it and open what it holds by name, as npm, cargo and git do, but not list it), it gives
// the owner back the read and search bits (restoreOwnerAccess: the daemon runs as the owner)
// and lists it again. A folder skipped because it could not be listed hid what the host's
// tools read in it (review 11, F3).
func readDirOwned(dir string) ([]os.DirEntry, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrPermission) {
		if rerr := restoreOwnerAccess(dir); rerr != nil {
			return nil, fmt.Errorf("%w (restoring the owner's read access: %v)", err, rerr)
		}
		ents, err = os.ReadDir(dir)
	}
	return ents, err
}

// eachDirName calls fn with the names in dir, at most n at a time, in the folder's own order,
// as readDirOwned lists it (the owner's read access given back when refused): a folder's
// millions of names a box made are never held at once.
func eachDirName(dir string, n int, fn func(names []string)) error {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrPermission) {
		if rerr := restoreOwnerAccess(dir); rerr != nil {
			return fmt.Errorf("%w (restoring the owner's read access: %v)", err, rerr)
		}
		f, err = os.Open(dir)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		names, err := f.Readdirnames(n)
		if len(names) > 0 {
			fn(names)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// ReadRegular reads the file path whole when it is a regular file of at most max bytes, without
// following a symlink at its last element or waiting on a FIFO: the daemon's read of a small
// file a box may have written (a workspace's .python-version).
func ReadRegular(path string, max int64) ([]byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readWhole(f, max)
}

// readFollow is ReadRegular following a symlink at path's last element, as git does where it
// reads the files of a git directory.
func readFollow(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readWhole(f, max)
}

// readWhole reads all of f, a regular file of at most max bytes: a longer one is not read
// (*tooLargeError), nor is anything but a regular file (errNotRegular).
func readWhole(f *os.File, max int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	if fi.Size() > max {
		return nil, newTooLarge(fi, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max { // it grew since the Stat
		if fi, err = f.Stat(); err == nil {
			return nil, newTooLarge(fi, max)
		}
	}
	return b, err
}
