package integrity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Resolve finds the protected paths of workspace ws (absolute, symlink-resolved): the
// defaults of plan.ProtectedPaths plus extra, the gitdirs of the workspace and its
// submodules, and what absent paths need as placeholders. Paths are looked up beneath ws
// without following symlinks, so a symlink or a .git file written by an earlier box never
// makes a launch bind something outside the workspace.
func Resolve(ws string, extra []string) (*Layout, error) {
	return resolveExcept(ws, extra, nil, false)
}

// resolveExcept is Resolve with the paths of absent (absolute paths) taken for absent: the
// placeholders of running launches (see Registry.Prepare). With boxRepo the workspace's
// repository, whatever is at .git, is one a running launch's box may be making (Registry.Prepare):
// taken as a box's (Layout.NoRepository), never as the user's.
func resolveExcept(ws string, extra []string, absent map[string]bool, boxRepo bool) (*Layout, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, ws, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("integrity: open workspace %s: %w", ws, err)
	}
	defer unix.Close(fd)
	var fs beneathFS = linuxFS{fd}
	if len(absent) > 0 {
		fs = absentFS{beneathFS: fs, ws: ws, absent: absent}
	}
	return resolveWith(ws, extra, fs, boxRepo), nil
}

// absentFS is a beneathFS in which the paths of absent, and what lies beneath them, do not
// exist.
type absentFS struct {
	beneathFS
	ws     string
	absent map[string]bool
}

func (f absentFS) kind(rel string) (string, error) {
	for p := filepath.Join(f.ws, rel); within(p, f.ws) && p != f.ws; p = filepath.Dir(p) {
		if f.absent[p] {
			return KindAbsent, nil
		}
	}
	return f.beneathFS.kind(rel)
}

type linuxFS struct{ ws int }

var beneath = uint64(unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS)

func (f linuxFS) kind(rel string) (string, error) {
	fd, err := unix.Openat2(f.ws, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
	if errors.Is(err, unix.ENOENT) {
		return KindAbsent, nil
	}
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", err
	}
	return kindOfMode(st.Mode), nil
}

func (f linuxFS) follow(rel string) (string, error) {
	fd, err := unix.Openat2(f.ws, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
}

func (f linuxFS) readlink(rel string) (string, error) {
	fd, err := unix.Openat2(f.ws, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: beneath})
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func (f linuxFS) read(rel string, max int64) ([]byte, error) {
	fd, err := unix.Openat2(f.ws, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, err
	}
	file := os.NewFile(uintptr(fd), rel)
	defer file.Close()
	return readWhole(file, max)
}

func (f absentFS) read(rel string, max int64) ([]byte, error) {
	if k, _ := f.kind(rel); k == KindAbsent {
		return nil, os.ErrNotExist
	}
	return f.beneathFS.read(rel, max)
}

func kindOfMode(m uint32) string {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return KindFile
	case unix.S_IFDIR:
		return KindDir
	case unix.S_IFLNK:
		return KindSymlink
	}
	return KindOther
}
