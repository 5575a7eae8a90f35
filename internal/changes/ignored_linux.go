package changes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// TakeIgnored moves each file rels names (workspace-relative paths of regular files and
// symlinks that the launch created or changed in git-ignored places of ws) out of the
// workspace into the store dir, as a proposed change marked IgnoredSuffix, which `agentbox
// apply` puts back. A file is moved by a rename where the store is on the workspace's file
// system, copied and removed otherwise. Past MaxIgnoredFiles or MaxIgnoredBytes (what the
// store held already counts), and at a path the store holds a change of already, the file is
// removed and counted in IgnoredDroppedRecord. A file gone meanwhile is skipped.
func TakeIgnored(dir, ws string, rels []string) (Ignored, error) {
	return takeIgnored(dir, ws, rels, MaxIgnoredFiles, MaxIgnoredBytes)
}

func takeIgnored(dir, ws string, rels []string, maxFiles int, maxBytes int64) (Ignored, error) {
	var res Ignored
	if len(rels) == 0 {
		return res, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	var err error
	if res.Dropped, err = readDroppedFile(filepath.Join(dir, IgnoredDroppedRecord)); err != nil {
		return res, err
	}
	files, bytes := 0, int64(0)
	if cs, err := Index(dir); err == nil {
		for _, c := range cs {
			if c.Ignored {
				files++
				bytes += c.Size
			}
		}
	}
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return res, fmt.Errorf("open workspace %s: %w", ws, err)
	}
	defer unix.Close(root)
	for _, rel := range rels {
		// The file is reached beneath the workspace without following a symlink: a folder
		// on the way replaced by a symlink meanwhile (by a second box on the workspace) leads
		// nowhere, and nothing outside the workspace is moved.
		parent, err := unix.Openat2(root, filepath.Dir(rel), &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneathNoLinks})
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			res.Failed = append(res.Failed, Failure{Path: rel, Err: fmt.Errorf("a folder on the way: %w", err)})
			continue
		}
		name := filepath.Base(rel)
		var st unix.Stat_t
		err = unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFLNK {
			unix.Close(parent)
			continue // gone meanwhile, or not a file
		}
		dst := filepath.Join(dir, storeName(rel))
		_, taken := os.Lstat(dst)
		if taken == nil || files >= maxFiles || bytes+st.Size > maxBytes {
			err := unix.Unlinkat(parent, name, 0)
			unix.Close(parent)
			if err != nil && !errors.Is(err, unix.ENOENT) {
				res.Failed = append(res.Failed, Failure{Path: rel, Err: err})
				continue
			}
			res.Dropped.Count++
			if len(res.Dropped.Paths) < maxDroppedPaths {
				res.Dropped.Paths = append(res.Dropped.Paths, rel)
			}
			continue
		}
		err = moveFile(parent, name, dst, st.Mode&unix.S_IFMT == unix.S_IFLNK, os.FileMode(st.Mode&0o777))
		unix.Close(parent)
		if err != nil {
			res.Failed = append(res.Failed, Failure{Path: rel, Err: err})
			continue
		}
		if err := os.WriteFile(dst+IgnoredSuffix, nil, 0o600); err != nil {
			res.Failed = append(res.Failed, Failure{Path: rel, Err: fmt.Errorf("moved to %s, not marked: %w", dst, err)})
			continue
		}
		files++
		bytes += st.Size
		res.Kept = append(res.Kept, rel)
		res.KeptBytes += st.Size
	}
	if res.Dropped.Count > 0 {
		data, err := json.Marshal(res.Dropped)
		if err == nil {
			err = atomicfile.WriteFile(filepath.Join(dir, IgnoredDroppedRecord), data, 0o600)
		}
		if err != nil {
			return res, fmt.Errorf("record of the files removed past the bounds: %w", err)
		}
	}
	return res, nil
}

// moveFile moves the file (or symlink) name of the folder parent to dst, creating dst's
// folders: a rename, or where the two lie on different file systems, a copy (a symlink made
// again) and the file removed.
func moveFile(parent int, name, dst string, link bool, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	err := unix.Renameat2(parent, name, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if err == nil || !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	if link {
		t, err := readlinkat(parent, name)
		if err != nil {
			return err
		}
		if err := os.Symlink(t, dst); err != nil {
			return err
		}
		return unix.Unlinkat(parent, name, 0)
	}
	if err := copyOut(parent, name, dst, perm); err != nil {
		return err
	}
	return unix.Unlinkat(parent, name, 0)
}

// copyOut copies the regular file name of the folder parent (not followed if a symlink) to
// the new file dst.
func copyOut(parent int, name, dst string, perm os.FileMode) error {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	in := os.NewFile(uintptr(fd), name)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm&0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(dst)
		return err
	}
	return nil
}

// applyIgnored puts the file the launch left in an ignored place back at name in the folder
// parent, from src in the store: by a rename that never replaces (a copy where the store is
// on another file system), so that the host's tools never see it half written and nothing
// the host made there meanwhile is overwritten.
func applyIgnored(parent int, name, src, rel string, perm os.FileMode) error {
	// The box's permission bits, without group and other write (as a copy would have them).
	if err := os.Chmod(src, perm&0o755); err != nil {
		return err
	}
	err := unix.Renameat2(unix.AT_FDCWD, src, parent, name, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) {
		return errNoRename
	}
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%w: %s exists on the host", ErrConflict, rel)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	os.Remove(src + IgnoredSuffix)
	return nil
}

var errNoRename = errors.New("no rename across file systems")
