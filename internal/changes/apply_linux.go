package changes

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// WayBlocked reports whether a folder on the way to the workspace-relative rel is no folder of
// the workspace now (a symlink, a file): Apply refuses a new file there (ErrConflict), and
// `agentbox changes` says so. A folder that is absent is no obstacle (Apply makes it).
// Review 32 (B, F7): the host's .vscode turned into a symlink showed .vscode/settings.json as
// one apply would write, followed through the link.
func WayBlocked(ws, rel string) bool {
	dir := filepath.Dir(filepath.Clean(rel))
	if dir == "." {
		return false
	}
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: beneathNoLinks})
	if err == nil {
		unix.Close(fd)
		return false
	}
	return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR)
}

// beneathNoLinks resolves beneath a directory without following any symlink.
const beneathNoLinks = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Apply makes the proposed change at rel (workspace-relative) in workspace ws, from store dir,
// and removes it from the store. A change that creates the path never replaces anything: when
// the host has something at the path now, or a folder on the way is a symlink, it fails with
// ErrConflict and changes nothing. A change that modifies a protected file (Change.Modifies)
// replaces the host's file only while it still holds what it held when the launch started: a
// change the host made meanwhile fails with ErrConflict too. A change whose file was truncated
// is refused.
func Apply(dir, ws, rel string) error {
	rel = filepath.Clean(rel)
	if rel == "." || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%w: %q is not a workspace-relative path", ErrUnknown, rel)
	}
	src := filepath.Join(dir, storeName(rel))
	fi, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrUnknown, rel)
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		// A folder of changes is no change: its files are (review 32, B F8: "apply ID
		// .vscode" failed with an internal "is a directory").
		return fmt.Errorf("%w: %s is a folder; name the changes in it (agentbox changes lists them)", ErrUnknown, rel)
	}
	if _, err := os.Lstat(src + TruncatedSuffix); err == nil {
		return fmt.Errorf("%s: the box's file was larger than %d bytes and was kept truncated: it cannot be applied", rel, MaxFile)
	}
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open workspace %s: %w", ws, err)
	}
	defer unix.Close(root)
	if _, err := os.Lstat(src + baseSuffix); err == nil {
		return applyModify(root, src, rel, fi.Mode().Perm()&0o755)
	}
	parent, err := mkdirsBeneath(root, filepath.Dir(rel))
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("%w: %s: a folder on the way is a symlink or a file now", ErrConflict, rel)
		}
		return fmt.Errorf("%s: %w", rel, err)
	}
	defer unix.Close(parent)
	name := filepath.Base(rel)
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, parent, name); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("%w: %s exists on the host", ErrConflict, rel)
			}
			return fmt.Errorf("%s: %w", rel, err)
		}
		os.Remove(src + IgnoredSuffix)
		return os.Remove(src)
	}
	if _, err := os.Lstat(src + IgnoredSuffix); err == nil {
		// A file the launch left in an ignored place: put back only if it holds what was
		// kept (and shown by agentbox changes), then renamed back, however large.
		if err := checkIgnored(src, rel); err != nil {
			return err
		}
		if err := applyIgnored(parent, name, src, rel, fi.Mode().Perm()); !errors.Is(err, errNoRename) {
			return err
		}
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	// The new file appears at its name whole (a temporary file beside it, renamed into place
	// unless the name exists meanwhile): the host's tools never read it empty or half written.
	// It has the box's mode bits, masked by the umask as for a file the user makes.
	if err := atomicfile.CreateAt(parent, name, b, fi.Mode().Perm()&0o755, true); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s exists on the host", ErrConflict, rel)
		}
		return fmt.Errorf("%s: %w", rel, err)
	}
	os.Remove(src + IgnoredSuffix)
	return os.Remove(src)
}

// mkdirsBeneath opens rel (a folder path) beneath root, creating the folders that are missing,
// never following a symlink.
func mkdirsBeneath(root int, rel string) (int, error) {
	fd, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil || rel == "." {
		return fd, err
	}
	for _, c := range strings.Split(rel, "/") {
		how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: beneathNoLinks}
		next, err := unix.Openat2(fd, c, how)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat2(fd, c, how)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// applyModify replaces the host's file at rel (beneath root) with the box's version at src,
// if the host's file still holds what it held when the launch started (src's base): by a
// rename of a new file in the same folder, so that a reader sees the old file or the new one.
func applyModify(root int, src, rel string, mode os.FileMode) error {
	base, err := os.ReadFile(src + baseSuffix)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	parent, err := unix.Openat2(root, filepath.Dir(rel), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneathNoLinks})
	if err != nil {
		return fmt.Errorf("%w: %s: a folder on the way is gone, a symlink or a file now", ErrConflict, rel)
	}
	defer unix.Close(parent)
	name := filepath.Base(rel)
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: %s is gone or no longer a file on the host", ErrConflict, rel)
	}
	host := os.NewFile(uintptr(fd), rel)
	fi, err := host.Stat()
	var now []byte
	var truncated bool
	if err == nil && fi.Mode().IsRegular() {
		now, truncated, err = readBounded(host)
	}
	host.Close()
	if err != nil || !fi.Mode().IsRegular() || truncated || !bytes.Equal(now, base) {
		return fmt.Errorf("%w: %s changed on the host since the box started", ErrConflict, rel)
	}
	// The host's permission bits, with the box's executable bits (a hook it made executable).
	mode = fi.Mode().Perm()&^0o111 | mode&0o111
	if err := atomicfile.WriteAt(parent, name, b, mode, true); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if err := os.Remove(src + baseSuffix); err != nil {
		return err
	}
	os.Remove(src + HiddenSuffix)
	return os.Remove(src)
}
