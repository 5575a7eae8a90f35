package changes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/atomicfile"
)

// TakeHidden keeps the tracked file rel (workspace-relative) of workspace ws, as the launch
// left it, in the store dir as a proposed change that modifies it (base beside it, as a staged
// copy's is kept: Collect; marked HiddenSuffix), and puts base back at rel: the file whose change the host's git
// views do not show (a .gitattributes conversion, a submodule whose changes the superproject
// hides: the integrity check at exit finds it) is the host's again, and agentbox changes shows
// the box's version against it, which agentbox apply puts back only while the host's file
// still holds base (docs/integrity.md, "Tracked edits git does not show").
//
// The file is read beneath ws without following a symlink, without waiting on a FIFO, a
// regular file only, at most MaxFile bytes (more is kept truncated: it cannot be applied); base
// replaces it by a rename of a new file beside it (the reader sees the old file or base, never
// a part), with the file's permission bits. A change the store holds at rel already is never
// replaced (ErrStoreHolds), and the file is left. On an error the host's file is as it was and
// the store holds nothing of it. Writes to the old file after it was read (a second box's
// open descriptor) go to an inode no name holds any more.
func TakeHidden(dir, ws, rel string, base []byte) (truncated bool, err error) {
	rel = filepath.Clean(rel)
	if rel == "." || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return false, fmt.Errorf("%q is not a workspace-relative path", rel)
	}
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("open workspace %s: %w", ws, err)
	}
	defer unix.Close(root)
	parent, err := unix.Openat2(root, filepath.Dir(rel), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneathNoLinks})
	if err != nil {
		return false, fmt.Errorf("%s: its folder: %w", rel, err)
	}
	defer unix.Close(parent)
	name := filepath.Base(rel)
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("%s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	fi, err := f.Stat()
	var content []byte
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if err == nil {
		content, truncated, err = readBounded(f)
	}
	f.Close()
	if err != nil {
		return false, fmt.Errorf("%s: %w", rel, err)
	}
	mode := uint32(fi.Mode().Perm())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("proposed changes: %w", err)
	}
	store, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("proposed changes %s: %w", dir, err)
	}
	defer unix.Close(store)
	srel := storeName(filepath.ToSlash(rel))
	var st unix.Stat_t
	for _, n := range []string{srel, srel + baseSuffix, srel + IgnoredSuffix, srel + HiddenSuffix} {
		if err := unix.Fstatat(store, n, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil || !errors.Is(err, unix.ENOENT) {
			return false, fmt.Errorf("%s: %w", rel, ErrStoreHolds)
		}
	}
	if err := writeStore(store, srel+baseSuffix, base, mode&0o755, false); err != nil {
		return false, err
	}
	if err := writeStore(store, srel+HiddenSuffix, nil, 0, false); err != nil {
		unix.Unlinkat(store, srel+baseSuffix, 0) // no half-kept change
		return false, err
	}
	if err := writeStore(store, srel, content, mode&0o755, truncated); err != nil {
		unix.Unlinkat(store, srel+baseSuffix, 0)
		unix.Unlinkat(store, srel+HiddenSuffix, 0)
		return false, err
	}
	if err := atomicfile.WriteAt(parent, name, base, os.FileMode(mode), true); err != nil {
		unix.Unlinkat(store, srel+HiddenSuffix, 0)
		unix.Unlinkat(store, srel, 0)
		unix.Unlinkat(store, srel+TruncatedSuffix, 0)
		unix.Unlinkat(store, srel+baseSuffix, 0)
		return false, fmt.Errorf("put %s back: %w", rel, err)
	}
	return truncated, nil
}
