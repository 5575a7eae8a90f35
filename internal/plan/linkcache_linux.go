package plan

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// linkCache keeps, between calls of FindLinks (one a launch), what was seen in each folder: its
// entries (the readdir) and what an lstat and a readlink found at each entry looked at. A
// launch read the folders of its PATH again, /usr/bin's 1,063 entries and the 367 links among
// them resolved, and the launch waited 3–6 ms for it (docs/benchmarks.md, "Configuration
// links"). An entry is used while its folder is the same folder, unchanged: the same device,
// inode, modification and change times (fstat of the folder opened in the call). Every
// change to a folder's entries — one created, removed, renamed or replaced, a symlink
// repointed (which is a new entry) — sets both times to the clock's present, as does a change
// of its mode or owner; the change time cannot be set otherwise. A folder whose times are
// within racyAge of the moment it was opened is not kept: a change in the same tick of the
// file system's clock would leave them as they were (git's racy-clean rule). What a call sees
// in a folder it opened is read through that descriptor (fstatat, readlinkat), so the entries
// kept are those of the folder the times are of.
var linkCache = struct {
	sync.Mutex
	folders map[string]*linkFolderEntry
	born    time.Time // when the cache began, with the clock's monotonic reading
}{folders: map[string]*linkFolderEntry{}}

// Kept only on local file systems whose folders' times change with their entries, at a
// finer grain than the second: not overlayfs or another union (a lower layer changes under
// the upper folder's times), FUSE, or a network file system (a server's clock, attribute
// caches), and not a folder whose change time falls on a whole second (a file system of
// one-second times: ext4 with 128-byte inodes, ext3), where the racy rule's margin is all
// that separates two changes. Review of the cache (twenty-third session).
var trustedTimes = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:  true, // ext2, ext3 and ext4
	unix.XFS_SUPER_MAGIC:   true,
	unix.BTRFS_SUPER_MAGIC: true,
	unix.TMPFS_MAGIC:       true,
	unix.F2FS_SUPER_MAGIC:  true,
	0x2fc12fc1:             true, // zfs
}

// timesTrusted reports whether a folder's times, on the file system fs, show every change of
// its entries (trustedTimes).
func timesTrusted(fs *unix.Statfs_t, st *unix.Stat_t) bool {
	return trustedTimes[int64(fs.Type)] && st.Ctim.Nsec != 0
}

// clockStepped reports whether the wall clock moved by more than a second otherwise than the
// monotonic clock between born and now (both read by time.Now).
func clockStepped(born, now time.Time) bool {
	d := now.Round(0).Sub(born.Round(0)) - now.Sub(born)
	return d > time.Second || d < -time.Second
}

// maxCachedFolders bounds linkCache: past it, it starts again empty.
const maxCachedFolders = 1024

// racyAge is how long before the look a folder must have last changed to be kept.
var racyAge = 2 * time.Second

// linkNow is the clock the racy rule reads (tests move it).
var linkNow = time.Now

type folderStamp struct {
	dev, ino     uint64
	mtime, ctime unix.Timespec
}

// linkFolderEntry is what linkCache keeps of one folder.
type linkFolderEntry struct {
	stamp         folderStamp
	listed        bool
	links, others []string
	places        map[string]placeSeen // by entry name
}

// linkFolder is a folder as one call of FindLinks sees it: open (fd, -1 when it is not a
// folder this process can read), and its linkCache entry (nil: not kept).
type linkFolder struct {
	fd   int
	path string
	e    *linkFolderEntry
	err  error // the folder could not be read for another reason than its absence
}

// folder opens dir for this call, once, and finds its cache entry (a new one when dir changed).
func (r *linkResolver) folder(dir string) *linkFolder {
	if f, ok := r.folders[dir]; ok {
		return f
	}
	f := &linkFolder{fd: -1, path: dir}
	r.folders[dir] = f
	fd, err := retryEINTR(func() (int, error) { return unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) })
	if err != nil {
		// Absent, no folder, unreadable, or a name too long: looked at by path, never kept.
		// Any other failure (no descriptor left, an I/O error) fails the call: no link found
		// is no answer.
		if !absentErr(err) {
			f.err = &os.PathError{Op: "open", Path: dir, Err: err}
		}
		return f
	}
	f.fd = fd
	var st unix.Stat_t
	var fs unix.Statfs_t
	if unix.Fstat(fd, &st) != nil || unix.Fstatfs(fd, &fs) != nil || !timesTrusted(&fs, &st) {
		return f
	}
	t := linkNow()
	if t.Sub(time.Unix(st.Mtim.Unix())) < racyAge || t.Sub(time.Unix(st.Ctim.Unix())) < racyAge {
		return f // changed lately (or in the future): not kept
	}
	stamp := folderStamp{dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim}
	linkCache.Lock()
	defer linkCache.Unlock()
	// The racy rule compares the file system's times with this clock: when the clock stepped
	// (its wall time moved otherwise than its monotonic time since the cache began), what was
	// kept is dropped.
	if linkCache.born.IsZero() || clockStepped(linkCache.born, t) {
		clear(linkCache.folders)
		linkCache.born = t
	}
	e := linkCache.folders[dir]
	if e == nil || e.stamp != stamp {
		if len(linkCache.folders) >= maxCachedFolders {
			clear(linkCache.folders)
		}
		e = &linkFolderEntry{stamp: stamp, places: map[string]placeSeen{}}
		linkCache.folders[dir] = e
	}
	f.e = e
	return f
}

// close closes the folders this call opened, and returns the first failure to read one.
func (r *linkResolver) close() error {
	var first error
	for _, f := range r.folders {
		if f.fd >= 0 {
			unix.Close(f.fd)
		}
		if first == nil {
			first = f.err
		}
	}
	return first
}

// entries returns the names of the symlinks in the folder and of its other entries.
func (f *linkFolder) entries() (links, others []string) {
	if f.e != nil {
		linkCache.Lock()
		listed, links, others := f.e.listed, f.e.links, f.e.others
		linkCache.Unlock()
		if listed {
			return links, others
		}
	}
	if f.fd < 0 {
		return nil, nil
	}
	// A copy of the descriptor, not the folder opened again ("."), which would need the right
	// to enter it: a folder readable but not searchable (mode 0644) is listed as before.
	dfd, err := unix.FcntlInt(uintptr(f.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		f.err = &os.PathError{Op: "read", Path: f.path, Err: err}
		return nil, nil
	}
	d := os.NewFile(uintptr(dfd), f.path)
	defer d.Close()
	links, others, err = readEntries(d)
	if err != nil {
		f.err = err
		return links, others
	}
	if f.e != nil {
		linkCache.Lock()
		f.e.listed, f.e.links, f.e.others = true, links, others
		linkCache.Unlock()
	}
	return links, others
}

// at returns what is at the entry name of the folder (the place p).
func (f *linkFolder) at(name, p string) placeSeen {
	if f.e != nil {
		linkCache.Lock()
		v, ok := f.e.places[name]
		linkCache.Unlock()
		if ok {
			return v
		}
	}
	v, err := lookAt(f.fd, name, p)
	if err != nil {
		// Never kept. One that is not the place's absence (an I/O error, no memory, a link
		// whose target could not be read) fails the call: a link taken for a plain entry would
		// never be followed.
		if !absentErr(err) && f.err == nil {
			f.err = &os.PathError{Op: "lstat", Path: p, Err: err}
		}
		return v
	}
	if f.e != nil {
		linkCache.Lock()
		f.e.places[name] = v
		linkCache.Unlock()
	}
	return v
}

// lookAt is what an lstat and a readlink find at the entry name of the folder open as dir, or,
// when dir is -1, at the path p. err is a failure other than the place's absence (ENOENT,
// ENOTDIR), with which the place counts as absent (absentErr) or the call fails (folder.at).
// An entry replaced between the lstat and the readlink is looked at again, once.
func lookAt(dir int, name, p string) (v placeSeen, err error) {
	for try := 0; ; try++ {
		v = placeSeen{}
		var st unix.Stat_t
		_, err = retryEINTR(func() (int, error) {
			if dir >= 0 {
				return 0, unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			}
			return 0, unix.Lstat(p, &st)
		})
		if err != nil {
			if err == unix.ENOENT || err == unix.ENOTDIR {
				err = nil
			}
			return v, err
		}
		v.exists = true
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return v, nil
		}
		var t string
		_, err = retryEINTR(func() (int, error) {
			var e error
			if dir >= 0 {
				t, e = readlinkAt(dir, name)
			} else {
				t, e = os.Readlink(p)
			}
			return 0, e
		})
		if err == nil {
			v.link, v.target = true, t
			return v, nil
		}
		if try > 0 || !(errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL)) {
			return v, err
		}
	}
}

// absentErr reports whether err, from opening or looking at a place, means the place is as
// good as absent for the rule (as before the cache): it is not there, not a folder, not
// reachable by this user, a loop of links, or a name too long.
func absentErr(err error) bool {
	for _, e := range []error{unix.ENOENT, unix.ENOTDIR, unix.EACCES, unix.ELOOP, unix.ENAMETOOLONG} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// retryEINTR calls f again while it fails with EINTR (a FUSE file system may return it).
func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// readlinkAt is readlinkat(2) of name in the folder open as dir.
func readlinkAt(dir int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		b := make([]byte, n)
		m, err := unix.Readlinkat(dir, name, b)
		if err != nil {
			return "", err
		}
		if m < n {
			return string(b[:m]), nil
		}
		if n >= 1<<16 {
			return "", unix.ENAMETOOLONG
		}
	}
}
