package changes

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// TakeIgnored moves each file rels names (workspace-relative paths of regular files and
// symlinks that the launch created or changed in git-ignored places of ws) out of the
// workspace into the store dir, as a proposed change marked IgnoredSuffix, which `agentbox
// apply` puts back. A file is moved by a rename where the store is on the workspace's file
// system, copied and removed otherwise. Past MaxIgnoredFiles or MaxIgnoredBytes (what the
// store held already counts), and at a path the store holds a change of already, the file is
// removed and counted in IgnoredDroppedRecord — except a file whose own ctime is before since
// (the launch's start): the host's bytes, unchanged, taken only because a folder above it was
// made or renamed in the launch. Such a file is never removed: past the bounds it is moved
// into the store by a rename, which copies nothing (not counted), and where the store is on
// another file system it is left in place (Left) to be reported (review 17, F3). A file the
// daemon cannot read (its own, execute-only: a box's chmod 0111) has its owner's read bit
// given back and is copied; failing that it is removed, counted (review 17, F8). A file gone
// meanwhile is skipped.
func TakeIgnored(dir, ws string, rels []string, since time.Time) (Ignored, error) {
	var ns int64 // the zero time: no file is the host's
	if !since.IsZero() {
		ns = since.UnixNano()
	}
	return takeIgnored(dir, ws, rels, ns, MaxIgnoredFiles, MaxIgnoredBytes)
}

func takeIgnored(dir, ws string, rels []string, since int64, maxFiles int, maxBytes int64) (Ignored, error) {
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
	// drop removes the file name of the folder parent (and closes parent), counted as removed
	// past the bounds.
	drop := func(parent int, name, rel string) {
		err := unix.Unlinkat(parent, name, 0)
		unix.Close(parent)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			res.Failed = append(res.Failed, Failure{Path: rel, Err: err})
			return
		}
		res.Dropped.Count++
		if len(res.Dropped.Paths) < maxDroppedPaths {
			res.Dropped.Paths = append(res.Dropped.Paths, rel)
		}
	}
	// moveHost moves the host's own file name of the folder parent past the bounds into the
	// store by a rename (closing parent): never removed (review 17, F3). At a path the store
	// holds a change of already (taken), or where the rename cannot be, it is left in place.
	// A file born before the launch that changed in it (changed true: the user's own file,
	// edited on the host while the box ran, or the box's edit of it) is never left under its
	// name where no rename into the store can be: it is renamed beside itself
	// (NAME.agentbox-kept-XXXXXXXX, in Renamed), neither removed nor left for the host's tools
	// to run; removed only when that rename fails too.
	moveHost := func(parent int, name, rel, dst string, taken, changed bool) {
		defer unix.Close(parent)
		left := func() {
			if !changed {
				res.Left = append(res.Left, rel)
				return
			}
			kept, err := renameBeside(parent, name)
			if err != nil {
				// Never left under its name: a box that took the names could otherwise keep
				// its rewrite of the host's file there (review 32 D, F2).
				if err := unix.Unlinkat(parent, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
					res.Failed = append(res.Failed, Failure{Path: rel, Err: err})
				}
				return
			}
			res.Renamed = append(res.Renamed, filepath.Join(filepath.Dir(rel), kept))
		}
		if taken {
			left()
			return
		}
		sum, err := moveOld(parent, name, dst)
		if errors.Is(err, errNoRename) {
			left()
			return
		}
		if err == nil {
			err = os.WriteFile(dst+IgnoredSuffix, []byte(hex.EncodeToString(sum)+"\n"), 0o600)
		}
		if err != nil {
			res.Failed = append(res.Failed, Failure{Path: rel, Err: err})
			return
		}
		res.Moved = append(res.Moved, rel)
	}
	var buf []byte // copyTake's, made once
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
		hostOld := st.Mode&unix.S_IFMT == unix.S_IFREG && st.Ctim.Nano() < since
		// Born before the launch (statx's birth time, where the file system keeps one): the
		// host's own file, whatever changed it since. Review 32 (B, F2): a file the user had
		// and edited on the host while the box ran has its ctime in the launch, and past the
		// bounds it was removed, the user's content with it.
		// One with another name (a hard link the box may have made to the host's file, which
		// shares its birth time) is not: each link would be taken past the bound uncounted
		// (review 32 D, F3).
		hostBorn := hostOld
		if !hostBorn && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 {
			var sx unix.Statx_t
			if unix.Statx(parent, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BTIME, &sx) == nil && sx.Mask&unix.STATX_BTIME != 0 {
				hostBorn = sx.Btime.Sec*1e9+int64(sx.Btime.Nsec) < since
			}
		}
		if taken == nil || files >= maxFiles || bytes+st.Size > maxBytes {
			if hostBorn {
				moveHost(parent, name, rel, dst, taken == nil, !hostOld)
			} else {
				drop(parent, name, rel)
			}
			continue
		}
		var mark []byte
		size := st.Size
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = moveLink(parent, name, dst)
		} else {
			// A regular file is copied into a new file of the store, never renamed: the
			// box's inode may have another name (a hard link) or be open in a second box,
			// and whatever writes through either after the user reviewed the change must not
			// reach what apply puts back (review 16, F4). The SHA-256 of what was copied is
			// the mark's content, checked by apply.
			var sum []byte
			if buf == nil {
				buf = make([]byte, len(zeroBlock))
			}
			sum, size, err = copyTake(parent, name, dst, os.FileMode(st.Mode&0o777), maxBytes-bytes, buf)
			if errors.Is(err, unix.EACCES) {
				// Unreadable to the daemon (execute-only, 0111: the kernel runs a program
				// its caller cannot read): its owner's read bit back, and again; failing
				// that it is removed, never left for the host's tools to run (review 17, F8).
				if giveOwnerRead(parent, name) == nil {
					sum, size, err = copyTake(parent, name, dst, os.FileMode(st.Mode&0o777), maxBytes-bytes, buf)
				}
				if errors.Is(err, unix.EACCES) && !hostOld {
					drop(parent, name, rel)
					continue
				}
			}
			if errors.Is(err, errPastBound) { // it grew since it was looked at
				if hostBorn {
					moveHost(parent, name, rel, dst, false, !hostOld)
				} else {
					drop(parent, name, rel)
				}
				continue
			}
			mark = []byte(hex.EncodeToString(sum) + "\n")
		}
		unix.Close(parent)
		if err != nil {
			res.Failed = append(res.Failed, Failure{Path: rel, Err: err})
			continue
		}
		if err := os.WriteFile(dst+IgnoredSuffix, mark, 0o600); err != nil {
			res.Failed = append(res.Failed, Failure{Path: rel, Err: fmt.Errorf("moved to %s, not marked: %w", dst, err)})
			continue
		}
		files++
		bytes += size
		res.Kept = append(res.Kept, rel)
		res.KeptBytes += size
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

// moveLink moves the symlink name of the folder parent to dst, creating dst's folders: a
// rename, or where the two lie on different file systems, the symlink made again and removed.
// (A symlink's target cannot be changed in place: another name of it does not reach dst.)
func moveLink(parent int, name, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	err := unix.Renameat2(parent, name, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if err == nil || !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	t, err := readlinkat(parent, name)
	if err != nil {
		return err
	}
	if err := os.Symlink(t, dst); err != nil {
		return err
	}
	return unix.Unlinkat(parent, name, 0)
}

// giveOwnerRead adds the owner's read bit to the regular file name of the folder parent,
// not following a symlink, where the daemon owns it (what chmod allows it anyway).
func giveOwnerRead(parent int, name string) error {
	fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
		return unix.EACCES
	}
	// An O_PATH descriptor is chmod-ed through its /proc/self/fd link (fchmod refuses it).
	return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), uint32(st.Mode&0o7777|0o400), 0)
}

// moveOld moves the regular file name of the folder parent to the new path dst of the store
// by a rename (errNoRename where the store is on another file system: nothing is copied), and
// returns the SHA-256 of what it holds there, which apply checks (a writer holding it open
// changes it, and apply refuses it then).
func moveOld(parent int, name, dst string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return nil, err
	}
	err := unix.Renameat2(parent, name, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) {
		return nil, errNoRename
	}
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(dst, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.EACCES) {
		if fi, lerr := os.Lstat(dst); lerr == nil && fi.Mode().IsRegular() && os.Chmod(dst, fi.Mode().Perm()|0o400) == nil {
			f, err = os.OpenFile(dst, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// renameBeside renames the file name of the folder parent to name.agentbox-kept-XXXXXXXX (8
// random hex digits, which a box cannot take beforehand: review 32 D, F2) and returns the new
// name.
func renameBeside(parent int, name string) (string, error) {
	var err error
	for try := 0; try < 4; try++ {
		var r [4]byte
		if _, err = rand.Read(r[:]); err != nil {
			return "", err
		}
		kept := name + ".agentbox-kept-" + hex.EncodeToString(r[:])
		if err = unix.Renameat2(parent, name, parent, kept, unix.RENAME_NOREPLACE); err == nil {
			return kept, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", err
		}
	}
	return "", err
}

// errPastBound: the file held more than the bytes left to keep (it grew since it was looked at).
var errPastBound = errors.New("past the bound of what is kept")

// copyTake copies the regular file name of the folder parent (not followed if a symlink) into
// the new file dst of the store (its folders created), and removes it from the workspace. It
// returns the SHA-256 and the size of what it copied: one read, so that the mark names exactly
// the bytes kept whatever a writer does to the box's file meanwhile. A file that holds more
// than left bytes is not kept (errPastBound; dst removed, the file left for the caller).
func copyTake(parent int, name, dst string, perm os.FileMode, left int64, buf []byte) (sum []byte, size int64, err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return nil, 0, err
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, err
	}
	in := os.NewFile(uintptr(fd), name)
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("no longer a regular file")
	}
	// The owner's read bit always: apply checks what the store holds by reading it (an
	// execute-only program, 0111, is kept 0511).
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm&0o755|0o400)
	if err != nil {
		return nil, 0, err
	}
	h := sha256.New()
	size, err = copySparse(out, io.TeeReader(io.LimitReader(in, left+1), h), buf)
	if err == nil && size > left {
		err = errPastBound
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
		return nil, 0, err
	}
	if err := unix.Unlinkat(parent, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		os.Remove(dst)
		return nil, 0, err
	}
	return h.Sum(nil), size, nil
}

// zeroBlock is copySparse's block of zeros (never written), and the size of its buffer.
var zeroBlock [1 << 20]byte

// copySparse copies r to the new file out through buf (at most len(zeroBlock) bytes), leaving
// a hole (a seek) for each block of zeros, as cp --sparse=auto does: a sparse build output
// stays sparse in the store, and a file of zeros takes no room there.
func copySparse(out *os.File, r io.Reader, buf []byte) (int64, error) {
	var size int64
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			var werr error
			if bytes.Equal(buf[:n], zeroBlock[:n]) {
				_, werr = out.Seek(int64(n), io.SeekCurrent)
			} else {
				_, werr = out.Write(buf[:n])
			}
			if werr != nil {
				return size, werr
			}
			size += int64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return size, out.Truncate(size)
		}
		if err != nil {
			return size, err
		}
	}
}

// checkIgnored reports whether the file src of the store holds exactly what TakeIgnored kept
// there: the SHA-256 its mark records. A mark without one (a store of an agentbox before
// review 16's F4, which renamed the box's file into the store, another name of it included)
// is refused too: what the file holds now cannot be told from what the user reviewed.
func checkIgnored(src, rel string) error {
	mark, err := os.ReadFile(src + IgnoredSuffix)
	if err != nil {
		return err
	}
	want, err := hex.DecodeString(strings.TrimSpace(string(mark)))
	if err != nil || len(want) != sha256.Size {
		return fmt.Errorf("%s: its proposed change records no SHA-256 (kept by an earlier agentbox, by a rename that may share the file with the box): it is not applied; check and copy it by hand from %s", rel, src)
	}
	f, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return fmt.Errorf("%s: its proposed change holds other bytes than were kept (sha256 %x, kept %x): it is not applied", rel, h.Sum(nil), want)
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
