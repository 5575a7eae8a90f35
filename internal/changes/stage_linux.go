package changes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/plan"
)

// Staging folders: what the box writes (its copy, bound over the protected file) and what the
// file held when the launch started.
const (
	stageBox  = "box"
	stageBase = "base"
)

// Stage makes a staged copy, in dir, of each protected path of ps that is a regular file of at
// most MaxFile bytes (read beneath its workspace, never through a symlink), and returns ps with
// Staged set for those: the box is given the copy, writable, instead of the file read-only, so
// that its writes succeed in the box and are kept as a proposed change (Collect) instead of
// refused. The others (folders, larger files, agentbox's own binaries the caller leaves out)
// are returned as they were, to be bound read-only. The copies are made mode 0600 folders
// beneath dir, never in the workspace; a copy keeps the file's permission bits.
//
// A protected regular file with more than one name (a hard link, whatever its size), or one
// in a protected folder (up to maxLinkWalk entries deep in it), fails with ErrHardLinked,
// naming the file and how to break the link: the box could write the host's file through its
// other name, which neither the copy nor a read-only bind covers.
func Stage(dir string, ps []plan.Protected) ([]plan.Protected, error) {
	out := append([]plan.Protected(nil), ps...)
	for i, p := range out {
		if p.Staged != "" {
			continue
		}
		rel, err := filepath.Rel(p.Beneath, p.Path)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		content, mode, ok, err := readProtected(p.Beneath, rel)
		if errors.Is(err, ErrHardLinked) {
			return nil, err // it names the file
		}
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", p.Path, err)
		}
		if !ok {
			if err := checkFolderLinks(p.Path); err != nil {
				return nil, err
			}
			continue
		}
		for _, side := range []string{stageBase, stageBox} {
			if err := writeCopy(filepath.Join(dir, side, rel), content, mode); err != nil {
				return nil, fmt.Errorf("stage %s: %w", p.Path, err)
			}
		}
		out[i].Staged = filepath.Join(dir, stageBox, rel)
	}
	return out, nil
}

// readProtected reads the regular file ws/rel (at most MaxFile bytes) without following any
// symlink; ok is false for anything else (a folder, a larger file, a path gone meanwhile). A
// regular file with more than one link fails with ErrHardLinked.
func readProtected(ws, rel string) (content []byte, mode uint32, ok bool, err error) {
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, false, fmt.Errorf("open workspace %s: %w", ws, err)
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: beneathNoLinks})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, false, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, false, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, false, err
	}
	if st.Nlink > 1 {
		return nil, 0, false, hardLinked(filepath.Join(ws, rel), uint64(st.Nlink))
	}
	if fi.Size() > MaxFile {
		return nil, 0, false, nil
	}
	b, truncated, err := readBounded(f)
	if err != nil || truncated {
		return nil, 0, false, err
	}
	return b, uint32(fi.Mode().Perm()), true, nil
}

// maxLinkWalk bounds the entries checkFolderLinks looks at in one protected folder (the
// integrity snapshot's entry bound).
const maxLinkWalk = 10000

// checkFolderLinks fails with ErrHardLinked when the folder at path (a protected folder, bound
// read-only) holds a regular file with more than one name; anything but a folder passes. It
// never follows a symlink, and looks at up to maxLinkWalk entries.
func checkFolderLinks(path string) error {
	if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
		return nil
	}
	n := 0
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone or unreadable meanwhile: the bind covers what is there
		}
		if n++; n > maxLinkWalk {
			return fs.SkipAll
		}
		if !d.Type().IsRegular() {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil && st.Nlink > 1 {
			return hardLinked(p, uint64(st.Nlink))
		}
		return nil
	})
	return err
}

// hardLinked is the error for a protected file at path with n names: what it is, and how the
// user breaks the link (a copy renamed over the name gives it an inode of its own; the other
// names keep the old one).
func hardLinked(path string, n uint64) error {
	return fmt.Errorf("%w: %s has %d names, and a box could change it through another one; "+
		"give it an inode of its own on the host (cp -p %s %s.copy && mv %s.copy %s), then launch again",
		ErrHardLinked, path, n, path, path, path, path)
}

// readBounded reads f up to MaxFile bytes; truncated says there was more.
func readBounded(f *os.File) ([]byte, bool, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(f, MaxFile+1))
	if err != nil {
		return nil, false, err
	}
	if n > MaxFile {
		return buf.Bytes()[:MaxFile], true, nil
	}
	return buf.Bytes(), false, nil
}

// writeCopy creates path (and its folders, 0700) with content and mode.
func writeCopy(path string, content []byte, mode uint32) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(content)
	if err == nil {
		err = f.Chmod(os.FileMode(mode))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Collect compares each staged copy in dir (Stage) with what the file held when the launch
// started and keeps, in the store at storeDir, each the box changed (its content, or its
// executable bits) as a proposed change that modifies the path, with what it held then beside
// it. Each copy is collected on its own: one that cannot be (a full disk, an unreadable copy)
// is reported in Collected.Failed and left in dir, with what the file held at launch, while the
// others are collected. A copy the box made larger than MaxFile is not kept as a proposed change
// (Collected.TooLarge). The copies collected, unchanged or too large are removed, and dir with
// them once none failed. Call it once the box has ended: nothing writes the copies then. The
// error is for dir as a whole (it could not be listed or removed).
func Collect(dir, storeDir string) (Collected, error) {
	boxDir := filepath.Join(dir, stageBox)
	var res Collected
	var store = -1
	defer func() {
		if store >= 0 {
			unix.Close(store)
		}
	}()
	one := func(rel string) (kept bool, err error) {
		base, baseMode, err := readCopy(filepath.Join(dir, stageBase, rel))
		if err != nil {
			return false, fmt.Errorf("what it held at launch: %w", err)
		}
		content, mode, err := readCopy(filepath.Join(boxDir, rel))
		if err != nil {
			return false, fmt.Errorf("the box's copy: %w", err)
		}
		if len(content) > MaxFile {
			return false, errTooLarge
		}
		// The box filled its copy to the bound box-init gives it while the box runs: what it
		// wrote beyond was refused. What fit is kept, marked truncated (it cannot be applied).
		_, err = os.Lstat(filepath.Join(boxDir, rel+TruncatedSuffix))
		full := err == nil
		if bytes.Equal(content, base) && (mode^baseMode)&0o111 == 0 && !full {
			return false, nil // unchanged
		}
		if store < 0 {
			if err := os.MkdirAll(storeDir, 0o700); err != nil {
				return false, fmt.Errorf("proposed changes: %w", err)
			}
			if store, err = unix.Open(storeDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
				store = -1
				return false, fmt.Errorf("proposed changes %s: %w", storeDir, err)
			}
		}
		// The host removed the file while the box ran, and the box created it again: box-init
		// kept that file as the change at the path (Guard.Add). This copy is left, not lost.
		var st unix.Stat_t
		if unix.Fstatat(store, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil &&
			unix.Fstatat(store, rel+baseSuffix, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			return false, errCreatedAgain
		}
		if err := writeStore(store, rel+baseSuffix, base, baseMode&0o755, false); err != nil {
			return false, err
		}
		if err := writeStore(store, rel, content, mode&0o755, full); err != nil {
			unix.Unlinkat(store, rel+baseSuffix, 0) // no half-kept change
			return false, err
		}
		if full {
			return true, errFull
		}
		return true, nil
	}
	err := filepath.WalkDir(boxDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == boxDir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, TruncatedSuffix) {
			return nil
		}
		rel, err := filepath.Rel(boxDir, p)
		if err != nil {
			return err
		}
		kept, err := one(rel)
		switch {
		case errors.Is(err, errTooLarge):
			res.TooLarge = append(res.TooLarge, rel)
		case errors.Is(err, errFull):
			res.Kept = append(res.Kept, rel)
			res.Truncated = append(res.Truncated, rel)
		case err != nil:
			res.Failed = append(res.Failed, Failure{Path: rel, Err: err})
			return nil // left in dir, with its base
		case kept:
			res.Kept = append(res.Kept, rel)
		}
		// Collected (or not to be kept): its copies go now, so that a full disk gets back
		// their room for the others.
		os.Remove(p)
		os.Remove(p + TruncatedSuffix)
		os.Remove(filepath.Join(dir, stageBase, rel))
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("staged copies in %s: %w", dir, err)
	}
	if len(res.Failed) > 0 {
		return res, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return res, fmt.Errorf("remove staged copies: %w", err)
	}
	return res, nil
}

// errCreatedAgain: the store holds, at the copy's path, what the box created there after the
// host removed the file.
var errCreatedAgain = errors.New("the host removed the file while the box ran and the box created it again: " +
	"what it created is the proposed change at the path, and what it wrote to its copy before is not kept with it")

// errFull: the box filled its copy to MaxFile while it ran; it was kept truncated.
var errFull = errors.New("the box filled its copy to the bound")

// errTooLarge: the box's copy is larger than MaxFile.
var errTooLarge = errors.New("larger than the proposed-change bound")

// readCopy reads a staged copy (at most MaxFile+1 bytes: more means truncated) and its
// permission bits, whatever mode the box gave it (its owner may always change it back).
func readCopy(path string) ([]byte, uint32, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s is not a regular file", path)
	}
	mode := uint32(fi.Mode().Perm())
	if mode&0o400 == 0 {
		if err := os.Chmod(path, fi.Mode().Perm()|0o400); err != nil {
			return nil, 0, err
		}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxFile+1)); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), mode, nil
}
