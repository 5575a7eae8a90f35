package integrity

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// errOutside is returned by readBeneath for a path whose symlinks lead out of the workspace.
var errOutside = errors.New("leads out of the workspace")

// readBeneath reads up to max bytes of the regular file at path (beneath ws), following
// symlinks as git does but only while they stay beneath ws (errOutside otherwise), without
// blocking on a FIFO.
func readBeneath(ws, path string, max int64) ([]byte, error) {
	rel, err := filepath.Rel(ws, path)
	if err != nil || !within(path, ws) {
		return nil, errOutside
	}
	wfd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(wfd)
	fd, err := unix.Openat2(wfd, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	if errors.Is(err, unix.EXDEV) {
		return nil, errOutside
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// QuarantineSuffix is what a file moved aside gets before its number: the scan never takes
// path.agentbox-quarantined-N for configuration or a hook, and git never reads it.
const QuarantineSuffix = ".agentbox-quarantined-"

// moveAside renames path (beneath ws; no symlink on the way is followed, and a final symlink
// is moved itself) to path.agentbox-quarantined-N, never over an existing file, and returns
// the new path. Nothing is deleted: the user reviews and removes it.
func moveAside(ws, path string) (string, error) {
	rel, err := filepath.Rel(ws, filepath.Dir(path))
	if err != nil || !within(path, ws) || path == ws {
		return "", fmt.Errorf("%s is not beneath the workspace", path)
	}
	wfd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(wfd)
	dir, err := unix.Openat2(wfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	aside, err := RenameAside(dir, filepath.Base(path))
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(path), aside), nil
}

// RenameAside renames name in the folder dirfd to name.agentbox-quarantined-N, with the first
// N that is free (never over an existing file), and returns the new name.
func RenameAside(dirfd int, name string) (string, error) {
	for n := 1; n < 1000; n++ {
		aside := name + QuarantineSuffix + strconv.Itoa(n)
		err := unix.Renameat2(dirfd, name, dirfd, aside, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", err
		}
		return aside, nil
	}
	return "", errors.New("too many quarantined files")
}
