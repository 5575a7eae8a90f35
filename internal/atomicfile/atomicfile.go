// Package atomicfile replaces files atomically: a reader sees the old content or the new,
// never a part of either, and after a crash the file holds one of them. It is the one helper
// every package uses to write a file in place, by path (state, caches, launchers, managed
// settings, the shim's exit status) or beneath an open folder descriptor (WriteAt: the store of
// proposed changes, a protected file that apply replaces; CreateAt: a new file that apply makes,
// never replacing one).
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// WriteFile replaces path with data, with mode perm (not masked by the umask). It writes a
// temporary file in path's directory (created exclusively, so no file or symlink of another's
// is written through), syncs it, renames it over path and syncs the directory, so that the
// rename itself survives a crash. A symlink at path is replaced, never followed. On an error
// the temporary file is gone and path is as it was, unless only the directory's sync failed
// (the error says so).
func WriteFile(path string, data []byte, perm fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err == nil {
			return
		}
		if rerr := os.Remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("%w (and removing %s: %v)", err, tmp, rerr)
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// The rename is in the directory: without this sync a crash may bring back the old entry
	// (or none) although the data is on disk.
	if err := syncDir(dir); err != nil && !errors.Is(err, syscall.EINVAL) { // EINVAL: a file system without directory sync

		return fmt.Errorf("write %s: sync %s: %w", path, dir, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// IsTemp reports whether name (one path element) has the form of the temporary files WriteFile
// and WriteAt write before their rename (".NAME.tmp-DIGITS" or ".NAME.tmp-DIGITS-DIGITS"): one
// left by a crash is not a file of its own, and a store that lists a folder must tell them
// apart from names others chose.
func IsTemp(name string) bool {
	i := strings.LastIndex(name, ".tmp-")
	if !strings.HasPrefix(name, ".") || i < 2 {
		return false
	}
	rest := name[i+len(".tmp-"):]
	if rest == "" || rest[0] == '-' || rest[len(rest)-1] == '-' || strings.Count(rest, "-") > 1 {
		return false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
