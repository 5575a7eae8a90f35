package changes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// beneathNoLinks resolves beneath a directory without following any symlink.
const beneathNoLinks = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Apply creates the proposed change at rel (workspace-relative) in workspace ws, from store dir,
// and removes it from the store. It never replaces anything: when the host has something at the
// path now, or a folder on the way is a symlink, it fails with ErrConflict and changes nothing.
// A change whose file was truncated is refused.
func Apply(dir, ws, rel string) error {
	rel = filepath.Clean(rel)
	if rel == "." || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%w: %q is not a workspace-relative path", ErrUnknown, rel)
	}
	src := filepath.Join(dir, rel)
	fi, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s", ErrUnknown, rel)
	}
	if err != nil {
		return err
	}
	if _, err := os.Lstat(src + truncatedSuffix); err == nil {
		return fmt.Errorf("%s: the box's file was larger than %d bytes and was kept truncated: it cannot be applied", rel, MaxFile)
	}
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open workspace %s: %w", ws, err)
	}
	defer unix.Close(root)
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
		return os.Remove(src)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	fd, err := unix.Openat(parent, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(fi.Mode().Perm()&0o755))
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%w: %s exists on the host", ErrConflict, rel)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		unix.Unlinkat(parent, name, 0)
		return fmt.Errorf("%s: %w", rel, werr)
	}
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
