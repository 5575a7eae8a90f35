package changes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentbox/agentbox/internal/atomicfile"
)

// IgnoredSuffix names, beside a kept file, the mark of a change that is a file the launch left
// in a git-ignored place of the workspace (TakeIgnored): not protected configuration, but code
// the host's tools would run (a build's output, a test file in bin/, a plugin's metadata in
// *.egg-info/) and that no git status shows. It holds nothing.
const IgnoredSuffix = ".agentbox-ignored"

// IgnoredDroppedRecord names, at the top of a store, the record of the files TakeIgnored
// removed from the workspace without keeping them, past its bounds (Dropped).
const IgnoredDroppedRecord = ".agentbox-ignored-dropped.json"

// MaxIgnoredFiles and MaxIgnoredBytes bound what TakeIgnored keeps of one launch: files, and
// the bytes of their contents together. Past either, a file is removed from the workspace and
// counted in IgnoredDroppedRecord, never left in place.
const (
	MaxIgnoredFiles = 10000
	MaxIgnoredBytes = 1 << 30
)

// Ignored is what TakeIgnored did: the paths kept as proposed changes (Kept, their bytes
// KeptBytes), and those removed from the workspace past the bounds (Dropped).
type Ignored struct {
	Kept      []string
	KeptBytes int64
	Dropped   Dropped
	// Failed are the files that could be neither kept nor removed, and why: they are still
	// in the workspace, to be reported.
	Failed []Failure
}

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
	for _, rel := range rels {
		src := filepath.Join(ws, rel)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil || !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		dst := filepath.Join(dir, storeName(rel))
		_, taken := os.Lstat(dst)
		if taken == nil || files >= maxFiles || bytes+fi.Size() > maxBytes {
			if err := os.Remove(src); err != nil && !errors.Is(err, os.ErrNotExist) {
				res.Failed = append(res.Failed, Failure{Path: rel, Err: err})
				continue
			}
			res.Dropped.Count++
			if len(res.Dropped.Paths) < maxDroppedPaths {
				res.Dropped.Paths = append(res.Dropped.Paths, rel)
			}
			continue
		}
		if err := moveFile(src, dst, fi); err != nil {
			res.Failed = append(res.Failed, Failure{Path: rel, Err: err})
			continue
		}
		if err := os.WriteFile(dst+IgnoredSuffix, nil, 0o600); err != nil {
			res.Failed = append(res.Failed, Failure{Path: rel, Err: fmt.Errorf("moved to %s, not marked: %w", dst, err)})
			continue
		}
		files++
		bytes += fi.Size()
		res.Kept = append(res.Kept, rel)
		res.KeptBytes += fi.Size()
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

// moveFile moves the file (or symlink) src to dst, creating dst's folders: a rename, or where
// the two lie on different file systems, a copy (a symlink made again) and src removed.
func moveFile(src, dst string, fi os.FileInfo) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	err := os.Rename(src, dst)
	if err == nil || !errors.Is(err, syscall.EXDEV) {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		t, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(t, dst); err != nil {
			return err
		}
		return os.Remove(src)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm()&0o755)
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
	return os.Remove(src)
}

// ReadIgnoredDropped returns what TakeIgnored removed from the workspace without keeping it
// (none when none).
func ReadIgnoredDropped(dir string) (Dropped, error) {
	return readDroppedFile(filepath.Join(dir, IgnoredDroppedRecord))
}
