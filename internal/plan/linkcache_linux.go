package plan

import (
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
}{folders: map[string]*linkFolderEntry{}}

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
}

// folder opens dir for this call, once, and finds its cache entry (a new one when dir changed).
func (r *linkResolver) folder(dir string) *linkFolder {
	if f, ok := r.folders[dir]; ok {
		return f
	}
	f := &linkFolder{fd: -1, path: dir}
	r.folders[dir] = f
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return f // absent, or no folder, or unreadable: looked at by path, never kept
	}
	f.fd = fd
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return f
	}
	t := linkNow()
	if t.Sub(time.Unix(st.Mtim.Unix())) < racyAge || t.Sub(time.Unix(st.Ctim.Unix())) < racyAge {
		return f // changed lately (or in the future): not kept
	}
	stamp := folderStamp{dev: st.Dev, ino: st.Ino, mtime: st.Mtim, ctime: st.Ctim}
	linkCache.Lock()
	defer linkCache.Unlock()
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

// close closes the folders this call opened.
func (r *linkResolver) close() {
	for _, f := range r.folders {
		if f.fd >= 0 {
			unix.Close(f.fd)
		}
	}
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
	dfd, err := unix.Openat(f.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	d := os.NewFile(uintptr(dfd), f.path)
	defer d.Close()
	links, others = readEntries(d)
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
	v := lookAt(f.fd, name, p)
	if f.e != nil {
		linkCache.Lock()
		f.e.places[name] = v
		linkCache.Unlock()
	}
	return v
}

// lookAt is what an lstat and a readlink find at the entry name of the folder open as dir, or,
// when dir is -1, at the path p.
func lookAt(dir int, name, p string) placeSeen {
	var v placeSeen
	var st unix.Stat_t
	var err error
	if dir >= 0 {
		err = unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	} else {
		err = unix.Lstat(p, &st)
	}
	if err != nil {
		return v
	}
	v.exists = true
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return v
	}
	var t string
	if dir >= 0 {
		t, err = readlinkAt(dir, name)
	} else {
		t, err = os.Readlink(p)
	}
	if err == nil {
		v.link, v.target = true, t
	}
	return v
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
