package integrity

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/agentbox/agentbox/internal/atomicfile"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// errOutside is returned by readBeneath for a path whose symlinks lead out of the workspace.
var errOutside = errors.New("leads out of the workspace")

// readBeneath reads the regular file at path (beneath ws), following symlinks as git does
// but only while they stay beneath ws (errOutside otherwise), without blocking on a FIFO. A
// file longer than max is not read: the error is a *tooLargeError, never a prefix, since a
// verdict on a prefix is no verdict on what git or a tool reads, the whole file (review 13,
// F7).
func readBeneath(ws, path string, max int64) ([]byte, error) {
	f, err := openReadBeneath(ws, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readWhole(f, max)
}

// readTailBeneath is readBeneath, except that of a file longer than max it returns the last
// max bytes from the first line that begins in them: the newest records of a log git appends
// to (a reflog), which a box can pad past any bound (review 32 F, F3).
func readTailBeneath(ws, path string, max int64) ([]byte, error) {
	f, err := openReadBeneath(ws, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() <= max {
		return readWhole(f, max)
	}
	b := make([]byte, max)
	n, err := f.ReadAt(b, fi.Size()-max)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	b = b[:n]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return b, nil
}

// openReadBeneath opens the regular file at path beneath ws for reading, as readBeneath reads
// it, for a caller that streams it.
func openReadBeneath(ws, path string) (*os.File, error) {
	return openRegular(ws, path, 0, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_MAGICLINKS)
}

// openRegular opens the regular file at path (beneath ws) for reading, with the extra open
// flags and openat2's resolve flags given, without blocking on a FIFO: errOutside for a path
// that leads out of ws, errNotRegular for anything but a regular file.
func openRegular(ws, path string, flags, resolve uint64) (*os.File, error) {
	rel, err := filepath.Rel(ws, path)
	if err != nil || !within(path, ws) {
		return nil, errOutside
	}
	wfd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(wfd)
	var st unix.Stat_t
	fd, err := openRegularAt(wfd, rel, flags, resolve, &st)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openRegularAt is openRegular for rel beneath the folder wfd (a descriptor), returning the
// file's descriptor and filling st with its stat data: for the check at exit, which opens
// thousands of files of the workspace and keeps one descriptor of it (an *os.File costs two
// system calls more, its poller's).
func openRegularAt(wfd int, rel string, flags, resolve uint64, st *unix.Stat_t) (int, error) {
	fd, err := unix.Openat2(wfd, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | flags, Resolve: resolve})
	if errors.Is(err, unix.EXDEV) {
		return -1, errOutside
	}
	if err != nil {
		return -1, err
	}
	if err := unix.Fstat(fd, st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return -1, errNotRegular
	}
	return fd, nil
}

// fdReader reads the file descriptor it is.
type fdReader int

func (r fdReader) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// QuarantineSuffix begins the name of the folder beside a file moved aside that holds it
// (FOLDER/.agentbox-quarantined-N/NAME), and ends a file's name moved aside: git never reads
// it. The scans pass over what the launch's checks moved aside by their record (State.Aside,
// passOver), never by this name, which a box can give anything (review 16, F1).
const QuarantineSuffix = atomicfile.QuarantineSuffix

// moveAside renames path (beneath ws; no symlink on the way is followed, and a final symlink
// is moved itself) into .agentbox-quarantined-N beside it (AsidePath), never over an existing file, and returns
// the new path. Nothing is deleted: the user reviews and removes it.
func moveAside(ws, path string) (string, error) {
	dir, err := parentBeneath(ws, path)
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	aside, err := atomicfile.RenameAside(dir, filepath.Base(path))
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(path), aside), nil
}

// parentBeneath opens the folder of path (beneath the workspace ws, O_PATH), resolving it
// beneath ws so that no symlink on the way leads out of it.
func parentBeneath(ws, path string) (int, error) {
	rel, err := filepath.Rel(ws, filepath.Dir(path))
	if err != nil || !within(path, ws) || path == ws {
		return -1, fmt.Errorf("%s is not beneath the workspace", path)
	}
	wfd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(wfd)
	return unix.Openat2(wfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath})
}

// removeSpecial removes path (beneath the workspace ws, its folder opened without following a
// symlink out of it) when it is a FIFO, a socket, a device or a symlink (never followed), and
// says what a symlink led to; a regular file or a folder is left.
func removeSpecial(ws, path string) (removed bool, what string) {
	dir, err := parentBeneath(ws, path)
	if err != nil {
		return false, ""
	}
	defer unix.Close(dir)
	name := filepath.Base(path)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, ""
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFDIR:
		return false, ""
	case unix.S_IFLNK:
		buf := make([]byte, 4096)
		if n, err := unix.Readlinkat(dir, name, buf); err == nil {
			what = fmt.Sprintf(" (it led to %q)", buf[:n])
		}
	}
	return unix.Unlinkat(dir, name, 0) == nil, what
}

// restoreOwnerAccess adds the owner's read and search bits to the folder dir, which must be
// the caller's own (the daemon runs as the workspace's owner): opened O_PATH without following
// any symlink on the way (the path the scan listed, literally), changed through that
// descriptor (/proc/self/fd), never through a name a box could swap.
func restoreOwnerAccess(dir string) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to the daemon's %d", dir, st.Uid, os.Geteuid())
	}
	return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), st.Mode&0o7777|0o500, 0)
}
