package changes

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/atomicfile"
	"github.com/agentbox/agentbox/internal/inotify"
	"github.com/agentbox/agentbox/internal/plan"
	"golang.org/x/sys/unix"
)

// maxHeld bounds the captured files whose content the guard keeps following (their inode
// stays open, so that what the box writes after creating the file is kept too).
const maxHeld = 256

// Guard moves what appears at a workspace's guarded paths (plan.Guard) out of the workspace
// into a store of proposed changes. In the box, box-init runs one for the box's life: it
// watches the folders where a guarded path would appear (inotify) and moves what appears the
// moment it is seen, so that nothing the box creates there stays on the host. The daemon runs
// one pass when the launch has ended (a box-init that was killed, or an engine without one).
//
// A captured file's inode is kept open: the box may still be writing it, and what it writes
// until it closes the file is kept too.
type Guard struct {
	guards []plan.Guard
	added  []plan.Guard // guarded since the launch started (Add), recorded in the store
	store  int          // directory fd of the store
	in     int          // inotify fd; -1 for a single pass
	wake   int          // eventfd that ends Run
	done   chan struct{}
	// finished says Finish has run; finishErr is what it returned.
	finished  bool
	finishErr error
	// Captured, when set, is called with the workspace path of each change kept.
	Captured func(path string)
	// Restored, when set, is called with the path of each guarded symlink made again.
	Restored func(path string)

	mu     sync.Mutex
	held   map[int32]*heldFile  // inotify wd of a captured inode → it
	byPath map[string]*heldFile // workspace-relative path → the inode held for it
	// interest holds, per watched folder's wd, the names whose appearance makes a pass ("" for
	// any name: a protected folder's entries); a file created elsewhere costs no pass.
	interest map[int32]map[string]bool
	// unlinked holds, per watched folder's wd, the names whose removal makes a pass: the names
	// on the way to a guarded symlink (Link) and the link's own, so that a link the box deletes
	// is made again at once, not at the next pass something else starts.
	unlinked map[int32]map[string]bool
	errs     []error
	// kept holds the size of each change in the store (by its path in the store), total their
	// sum: the store's bounds (MaxChanges, MaxStore). dropped is what was not kept past them.
	kept    map[string]int64
	total   int64
	dropped Dropped
}

// Open returns a guard for guards that keeps what it captures in dir (created when missing).
// With watch, Run follows the workspace with inotify until Close; without, only Scan and Close
// do anything.
func Open(dir string, guards []plan.Guard, watch bool) (*Guard, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("proposed changes: %w", err)
	}
	store, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("proposed changes %s: %w", dir, err)
	}
	g := &Guard{guards: guards, store: store, in: -1, wake: -1, held: map[int32]*heldFile{}, byPath: map[string]*heldFile{},
		interest: map[int32]map[string]bool{}, unlinked: map[int32]map[string]bool{}, kept: map[string]int64{}}
	// What the store holds already (box-init's changes, at the daemon's pass at exit) counts.
	have, err := Index(dir)
	if err == nil {
		g.dropped, err = ReadDropped(dir)
	}
	if err != nil {
		unix.Close(store)
		return nil, err
	}
	for _, c := range have {
		g.kept[storeName(c.Path)] = c.Size
		g.total += c.Size
	}
	if watch {
		if g.in, err = unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK); err != nil {
			unix.Close(store)
			return nil, fmt.Errorf("watch the workspace's absent protected paths: inotify: %w (raise fs.inotify.max_user_instances, or end what holds them)", err)
		}
		if g.wake, err = inotify.NewWake(); err != nil {
			unix.Close(store)
			unix.Close(g.in)
			return nil, err
		}
	}
	return g, nil
}

// Add guards one more path from now on: a protected path that existed when the launch started
// and that the host removed (or renamed away) while the box ran, taking the bind over it along
// in the box. Whatever is at the path now may be the box's: like every guarded path, it is
// moved into the store, and so is what appears there later, for the rest of the launch. The
// path is recorded in the store first (Added), so that the daemon's pass at exit covers it even
// when this guard cannot. It returns the errors of the path's first pass.
func (g *Guard) Add(gd plan.Guard) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, have := range g.guards {
		if have == gd {
			return nil
		}
	}
	data, err := json.Marshal(append(g.added, gd))
	if err == nil {
		err = atomicfile.WriteAt(g.store, AddedRecord, data, 0o600, false)
	}
	if err != nil {
		return fmt.Errorf("record guarded path %s: %w", gd.Path, err)
	}
	g.added = append(g.added, gd)
	g.guards = append(g.guards, gd)
	g.errs = nil
	g.scan(gd)
	// A folder on the way that the host removed while the scan looked (git's checkout removes
	// a folder it emptied right after the file in it: CI, TestAttackHostRemovedProtectedFile)
	// is looked for again from the deepest folder that exists then.
	for try := 0; try < 3 && len(g.errs) > 0 && allNotExist(g.errs); try++ {
		g.errs = nil
		g.scan(gd)
	}
	return errors.Join(g.errs...)
}

// allNotExist reports whether every error of errs says that something was not there.
func allNotExist(errs []error) bool {
	for _, err := range errs {
		if !errors.Is(err, os.ErrNotExist) {
			return false
		}
	}
	return true
}

// Added returns the paths a launch's box-init guarded after the launch started (Add), from its
// store dir; none when it recorded none.
func Added(dir string) ([]plan.Guard, error) {
	data, err := os.ReadFile(filepath.Join(dir, AddedRecord))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var gs []plan.Guard
	if err := json.Unmarshal(data, &gs); err != nil {
		return nil, fmt.Errorf("guarded paths %s: %w", filepath.Join(dir, AddedRecord), err)
	}
	return gs, nil
}

// Scan moves whatever is at a guarded path now into the store, and (watching) makes sure the
// folders where one could appear are watched. It returns the first error of the pass.
func (g *Guard) Scan() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = nil
	for _, gd := range g.guards {
		g.scan(gd)
	}
	return errors.Join(g.errs...)
}

func (g *Guard) fail(err error) { g.errs = append(g.errs, err) }

// scan walks one guarded path from its workspace, component by component, never following a
// symlink: a missing component's folder is watched; a symlink on the way is moved out (it
// would lead the path elsewhere); the path itself is moved out (a protected folder stays, its
// entries are moved out). A guarded symlink (Link) stays; what is there instead, or on the
// way to it, is moved out, and the symlink is made again (restoreLink).
func (g *Guard) scan(gd plan.Guard) {
	rel, err := filepath.Rel(gd.Beneath, gd.Path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "../") {
		g.fail(fmt.Errorf("guarded path %s is not beneath %s", gd.Path, gd.Beneath))
		return
	}
	dir, err := unix.Open(gd.Beneath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		g.fail(fmt.Errorf("open %s: %w", gd.Beneath, err))
		return
	}
	dirPath := gd.Beneath
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		last := i == len(parts)-1
		// Each folder on the way is watched for the next name, present or not: a folder there
		// may be removed or renamed away (by the host or the box) and made again, and the new one
		// must be scanned. Watched first, then looked at: what appears in between is seen now.
		g.watch(dir, dirPath, c, gd.Link != "")
		var st unix.Stat_t
		err := unix.Fstatat(dir, c, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			if gd.Link != "" {
				g.restoreLink(dir, dirPath, parts[i:], gd.Link)
			}
			break
		}
		if err != nil {
			g.fail(fmt.Errorf("%s: %w", filepath.Join(dirPath, c), err))
			break
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		sub := strings.Join(parts[:i+1], "/")
		if !last && !isDir {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK || gd.Link != "" {
				g.capture(dir, c, sub)
			}
			if gd.Link != "" {
				g.restoreLink(dir, dirPath, parts[i:], gd.Link)
			}
			break // a file on the way: nothing can be beneath it
		}
		if last && gd.Link != "" {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				if t, err := readlinkat(dir, c); err == nil && t == gd.Link {
					break // the host's symlink
				}
			}
			g.capture(dir, c, sub)
			g.restoreLink(dir, dirPath, parts[i:], gd.Link)
			break
		}
		if last && !(gd.Dir && isDir) {
			g.capture(dir, c, sub)
			break
		}
		next, err := unix.Openat(dir, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			g.fail(fmt.Errorf("%s: %w", filepath.Join(dirPath, c), err))
			break
		}
		unix.Close(dir)
		dir, dirPath = next, filepath.Join(dirPath, c)
		if last { // a protected folder: it may exist; what is in it is moved out
			g.watch(dir, dirPath, "", false)
			g.captureEntries(dir, dirPath, sub, 0)
		}
	}
	unix.Close(dir)
}

// restoreLink makes the host's symlink of a guarded path again (target, at rest beneath the
// folder dir at path: the folders on the way that are missing are made first), where the box
// removed it or put something else there. Something that appears at a name meanwhile stays
// for the next pass.
func (g *Guard) restoreLink(dir int, path string, rest []string, target string) {
	link := filepath.Join(path, filepath.Join(rest...))
	fd, err := unix.Dup(dir)
	if err != nil {
		g.fail(fmt.Errorf("restore the symlink %s: %w", link, err))
		return
	}
	defer func() { unix.Close(fd) }()
	for i, c := range rest {
		if i == len(rest)-1 {
			err = unix.Symlinkat(target, fd, c)
			if err == nil && g.Restored != nil {
				g.Restored(filepath.Join(path, c))
			}
			break
		}
		if err = unix.Mkdirat(fd, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			break
		}
		next, oerr := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err = oerr; err != nil {
			break
		}
		g.watch(next, filepath.Join(path, c), rest[i+1], true)
		unix.Close(fd)
		fd, path = next, filepath.Join(path, c)
	}
	if err != nil && !errors.Is(err, unix.EEXIST) {
		g.fail(fmt.Errorf("restore the symlink %s: %w", link, err))
	}
}

// watch adds an inotify watch for name ("" for any) being created or moved into the folder fd
// (at path; opened without following a symlink), and with removal for name being deleted or
// moved away too (a name on the way to a guarded symlink). The watch is added through the
// descriptor, not the path, which may be gone or another folder by now (a folder the host
// removed is watched harmlessly: its re-creation is seen in the folder above). The events of
// one folder's watch accumulate (IN_MASK_ADD): another guard's name in the same folder keeps
// the removals watched.
func (g *Guard) watch(fd int, path, name string, removal bool) {
	if g.in < 0 {
		return
	}
	mask := uint32(unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR | unix.IN_MASK_ADD)
	if removal {
		mask |= unix.IN_DELETE | unix.IN_MOVED_FROM
	}
	wd, err := unix.InotifyAddWatch(g.in, "/proc/self/fd/"+strconv.Itoa(fd), mask)
	if err != nil {
		g.fail(fmt.Errorf("watch %s: inotify: %w (raise fs.inotify.max_user_watches)", path, err))
		return
	}
	addName(g.interest, int32(wd), name)
	if removal {
		addName(g.unlinked, int32(wd), name)
	}
}

func addName(m map[int32]map[string]bool, wd int32, name string) {
	if m[wd] == nil {
		m[wd] = map[string]bool{}
	}
	m[wd][name] = true
}

// maxDepth bounds how deep the guard follows folders made inside a protected folder.
const maxDepth = 16

// captureEntries moves the files of the protected folder dir (at path; rel in the workspace) out: folders in it
// stay (an empty folder runs nothing, and git does not list it) and are watched and followed
// the same way, so that the box can make `.opencode/agent/` and write in it; everything else
// (files, symlinks) is moved out.
func (g *Guard) captureEntries(dir int, path, rel string, depth int) {
	names, err := readNames(dir)
	if err != nil {
		g.fail(fmt.Errorf("%s: %w", rel, err))
		return
	}
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && depth < maxDepth {
			sub, err := unix.Openat(dir, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == nil {
				g.watch(sub, filepath.Join(path, n), "", false)
				g.captureEntries(sub, filepath.Join(path, n), rel+"/"+n, depth+1)
				unix.Close(sub)
				continue
			}
		}
		g.capture(dir, n, rel+"/"+n)
	}
}

// captureTree moves every entry of the folder dir (at rel) out, folders included.
func (g *Guard) captureTree(dir int, rel string) {
	names, err := readNames(dir)
	if err != nil {
		g.fail(fmt.Errorf("%s: %w", rel, err))
		return
	}
	for _, n := range names {
		g.capture(dir, n, rel+"/"+n)
	}
}

// capture moves the entry name of parent (at rel) into the store: a file's content (its inode
// kept open, see Guard), a symlink's target, a folder's entries one by one; anything else is
// removed. Whatever was at the name is gone from the workspace afterwards.
func (g *Guard) capture(parent int, name, rel string) {
	for try := 0; try < 8; try++ {
		var st unix.Stat_t
		if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			return
		} else if err != nil {
			g.fail(fmt.Errorf("%s: %w", rel, err))
			return
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // replaced or gone meanwhile: look again
			}
			var fst, now unix.Stat_t
			if unix.Fstat(fd, &fst) != nil || fst.Ino != st.Ino ||
				unix.Fstatat(parent, name, &now, unix.AT_SYMLINK_NOFOLLOW) != nil || now.Ino != st.Ino {
				unix.Close(fd)
				continue
			}
			if err := unix.Unlinkat(parent, name, 0); err != nil {
				unix.Close(fd)
				if errors.Is(err, unix.ENOENT) {
					return // moved away by the box: no longer at a protected path
				}
				g.fail(fmt.Errorf("remove %s: %w", rel, err))
				return
			}
			g.keep(fd, rel, st.Mode&0o755)
			return
		case unix.S_IFLNK:
			target, err := readlinkat(parent, name)
			if err != nil {
				continue
			}
			if err := unix.Unlinkat(parent, name, 0); err != nil {
				if errors.Is(err, unix.ENOENT) {
					return
				}
				g.fail(fmt.Errorf("remove %s: %w", rel, err))
				return
			}
			g.storeLink(rel, target)
			return
		case unix.S_IFDIR:
			sub, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			g.captureTree(sub, rel)
			unix.Close(sub)
			err = unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
			if err == nil || errors.Is(err, unix.ENOENT) {
				return
			}
			if !errors.Is(err, unix.ENOTEMPTY) {
				g.fail(fmt.Errorf("remove %s: %w", rel, err))
				return
			}
			// More entries came meanwhile: go round again.
		default:
			if err := unix.Unlinkat(parent, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				g.fail(fmt.Errorf("remove %s: %w", rel, err))
			}
			return
		}
	}
	g.fail(fmt.Errorf("%s keeps changing: not moved out", rel))
}

// keep stores a captured file's content now and, watching, follows its inode until it is
// closed after writing (IN_CLOSE_WRITE), to store what was written after it was created.
func (g *Guard) keep(fd int, rel string, mode uint32) {
	h := &heldFile{fd: fd, wd: -1, rel: rel, mode: mode}
	g.setAside(rel)
	kept := g.copy(h)
	if old := g.byPath[rel]; old != nil {
		g.drop(old)
	}
	if !kept || g.in < 0 || len(g.held) >= maxHeld {
		unix.Close(fd)
		return
	}
	wd, err := unix.InotifyAddWatch(g.in, "/proc/self/fd/"+strconv.Itoa(fd), unix.IN_CLOSE_WRITE)
	if err != nil {
		unix.Close(fd)
		return
	}
	h.wd = int32(wd)
	if other := g.held[h.wd]; other != nil { // the same inode again (a hard link)
		g.drop(other)
	}
	g.held[h.wd], g.byPath[rel] = h, h
}

func (g *Guard) drop(h *heldFile) {
	if h.wd >= 0 {
		unix.InotifyRmWatch(g.in, uint32(h.wd))
		delete(g.held, h.wd)
	}
	if g.byPath[h.rel] == h {
		delete(g.byPath, h.rel)
	}
	unix.Close(h.fd)
}

// copy writes a held file's content into the store at its path: up to MaxFile, and to what is
// left of MaxStore (see admit); it reports whether the store keeps it.
func (g *Guard) copy(h *heldFile) bool {
	srel := storeName(h.rel)
	if !g.admit(h.rel, srel) {
		return false
	}
	limit := max(0, min(MaxFile, MaxStore-(g.total-g.kept[srel])))
	buf := make([]byte, 0, 64<<10)
	chunk := make([]byte, 64<<10)
	truncated := false
	for off := int64(0); ; {
		n, err := unix.Pread(h.fd, chunk, off)
		if n <= 0 || err != nil {
			break
		}
		if int64(len(buf)+n) > limit {
			buf = append(buf, chunk[:limit-int64(len(buf))]...)
			truncated = true
			break
		}
		buf = append(buf, chunk[:n]...)
		off += int64(n)
	}
	if err := writeStore(g.store, srel, buf, h.mode, truncated); err != nil {
		g.fail(err)
		return true
	}
	g.total += int64(len(buf)) - g.kept[srel]
	g.kept[srel] = int64(len(buf))
	if g.Captured != nil {
		g.Captured(h.rel)
	}
	return true
}

// admit reports whether the store has room for a change at rel (srel in the store): one it
// holds already, or a new one within MaxChanges and with bytes left of MaxStore (a change it
// holds may fill what is left only). What it
// refuses is recorded in the store (DroppedRecord) and reported once.
func (g *Guard) admit(rel, srel string) bool {
	if _, ok := g.kept[srel]; ok || len(g.kept) < MaxChanges && g.total < MaxStore {
		return true
	}
	if g.dropped.Count == 0 {
		g.fail(fmt.Errorf("the launch's proposed changes are full (%d changes or %d bytes): %s was moved out of the workspace and not kept, as is what the box creates at protected paths from now on (agentbox changes names them)", MaxChanges, MaxStore, rel))
	}
	g.recordDropped(rel)
	return false
}

// recordDropped records rel among what the guard moved out of the workspace and did not keep
// (DroppedRecord).
func (g *Guard) recordDropped(rel string) {
	g.dropped.Count++
	if len(g.dropped.Paths) < maxDroppedPaths {
		g.dropped.Paths = append(g.dropped.Paths, rel)
	}
	data, err := json.Marshal(g.dropped)
	if err == nil {
		err = atomicfile.WriteAt(g.store, DroppedRecord, data, 0o600, false)
	}
	if err != nil {
		g.fail(fmt.Errorf("record the proposed changes not kept: %w", err))
	}
}

// writeStore writes content at rel in the store whose directory fd is store (by rename, so a
// reader never sees half of it), mode|0600, marked when truncated.
func writeStore(store int, rel string, content []byte, mode uint32, truncated bool) error {
	parent, err := mkdirsBeneath(store, filepath.Dir(rel))
	if err != nil {
		return fmt.Errorf("keep %s: %w", rel, err)
	}
	defer unix.Close(parent)
	name := filepath.Base(rel)
	clearStore(parent, name)
	if err := atomicfile.WriteAt(parent, name, content, os.FileMode(mode|0o600), false); err != nil {
		return fmt.Errorf("keep %s: %w", rel, err)
	}
	if truncated {
		if fd, err := unix.Openat(parent, name+TruncatedSuffix, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600); err == nil {
			unix.Close(fd)
		}
	} else {
		unix.Unlinkat(parent, name+TruncatedSuffix, 0)
	}
	return nil
}

func (g *Guard) storeLink(rel, target string) {
	g.setAside(rel)
	srel := storeName(rel)
	if !g.admit(rel, srel) {
		return
	}
	parent, name, err := g.storeParent(srel)
	if err != nil {
		g.fail(err)
		return
	}
	defer unix.Close(parent)
	clearStore(parent, name)
	if err := unix.Symlinkat(target, parent, name); err != nil {
		g.fail(fmt.Errorf("keep %s: %w", rel, err))
		return
	}
	g.total += int64(len(target)) - g.kept[srel]
	g.kept[srel] = int64(len(target))
	if g.Captured != nil {
		g.Captured(rel)
	}
}

// EarlierSuffix ends the names under which the store keeps files captured at a guarded path
// before the one it holds at the path (setAside): REL.agentbox-earlier-1, the first captured
// there, and REL.agentbox-earlier-2, the one captured last before the path's own; each a change
// of its own, which `agentbox apply ID REL.agentbox-earlier-N` writes beside the path.
const EarlierSuffix = ".agentbox-earlier-"

// setAside keeps what the store holds at rel, when it holds something, under a name of its own
// before a later capture at the same path takes rel: whoever made the earlier file (the box, or
// the user on the host while the box ran: the guard cannot tell) loses nothing, unless the box
// writes the path twice more after it. Review 32 (B, F1): the later capture replaced the earlier
// in the store, so a file the user created at a guarded path while a box ran, which the box
// then wrote again, existed nowhere. The first capture at the path is kept as earlier-1 for
// good; each later one in turn as earlier-2, replacing the one there (recorded as not kept), so
// that a box rewriting one path in a loop holds at most three changes there, not one a
// rewrite (review 32 D, F4: 256 rewrites of .envrc filled the store, and the user's next file
// at another guarded path was kept nowhere). Within the store's bounds (admit).
func (g *Guard) setAside(rel string) {
	srel := storeName(rel)
	size, ok := g.kept[srel]
	if !ok {
		return
	}
	erel := rel + EarlierSuffix + "1"
	if _, first := g.kept[storeName(erel)]; first {
		erel = rel + EarlierSuffix + "2"
	}
	esrel := storeName(erel)
	parent, name, err := g.storeParent(srel)
	if err != nil {
		g.fail(err)
		return
	}
	defer unix.Close(parent)
	ename := filepath.Base(esrel)
	if old, there := g.kept[esrel]; there {
		unix.Unlinkat(parent, ename, 0)
		unix.Unlinkat(parent, ename+TruncatedSuffix, 0)
		g.total -= old
		delete(g.kept, esrel)
		g.recordDropped(erel)
	} else if !g.admit(erel, esrel) {
		return
	}
	if err := unix.Renameat2(parent, name, parent, ename, unix.RENAME_NOREPLACE); err != nil {
		g.fail(fmt.Errorf("keep the earlier %s as %s: %w", rel, erel, err))
		return
	}
	if unix.Renameat(parent, name+TruncatedSuffix, parent, ename+TruncatedSuffix) != nil {
		unix.Unlinkat(parent, ename+TruncatedSuffix, 0)
	}
	delete(g.kept, srel)
	g.kept[esrel] = size
	// The inode held for the earlier file goes on being followed under its new name: what
	// its writer writes until it closes it is kept there (the box's echo > .envrc is taken as
	// it is created, empty, and copied again at its close). A file held under that name
	// before is done with.
	if prev := g.byPath[erel]; prev != nil {
		g.drop(prev)
	}
	if h := g.byPath[rel]; h != nil {
		delete(g.byPath, rel)
		h.rel = erel
		g.byPath[erel] = h
		g.copy(h)
	}
	if g.Captured != nil {
		g.Captured(erel)
	}
}

// clearStore removes what the store holds at name (an earlier change at the same path; a
// folder only when empty), so that the latest change replaces it.
func clearStore(parent int, name string) {
	var st unix.Stat_t
	if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
		return
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Unlinkat(parent, name, 0)
	}
}

// storeParent opens rel's folder in the store, creating it when missing.
func (g *Guard) storeParent(rel string) (int, string, error) {
	parent, err := mkdirsBeneath(g.store, filepath.Dir(rel))
	if err != nil {
		return -1, "", fmt.Errorf("keep %s: %w", rel, err)
	}
	return parent, filepath.Base(rel), nil
}

// Run follows the workspace until Close: each event in a watched folder makes a Scan; a held
// file closed after writing is copied again. It returns at once for a guard without watch.
func (g *Guard) Run() {
	if g.in < 0 {
		return
	}
	g.mu.Lock()
	g.done = make(chan struct{})
	done := g.done
	g.mu.Unlock()
	defer close(done)
	buf := make([]byte, 64<<10)
	for {
		if woken, err := inotify.Wait(g.in, g.wake, -1); err != nil || woken {
			return
		}
		rescan := false
		g.mu.Lock()
		// A read error ends this drain only: the next poll tells whether the watch still works.
		_ = inotify.Drain(g.in, buf, func(ev inotify.Event) {
			switch in := g.interest[ev.Wd]; {
			case g.held[ev.Wd] != nil && ev.Mask&unix.IN_CLOSE_WRITE != 0:
				g.copy(g.held[ev.Wd])
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				rescan = true // events were lost
			case ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && (in[ev.Name] || in[""]):
				rescan = true
			case ev.Mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0 && g.unlinked[ev.Wd][ev.Name]:
				rescan = true // a guarded symlink, or a folder on its way, removed: made again now
			}
		})
		g.mu.Unlock()
		if rescan {
			if err := g.Scan(); err != nil {
				fmt.Fprintf(os.Stderr, "agentbox: guarding the protected paths: %v\n", err)
			}
		}
	}
}

// Finish ends Run, makes a last pass (Scan) and stores the final content of every held file.
// It returns the errors of the last pass; a second call returns them again and does nothing.
// The guard keeps its descriptors until Close: the release of its inotify instance waits for
// the kernel to free its watches (a grace period of several milliseconds), which box-init
// leaves until after it has reported the box's end.
func (g *Guard) Finish() error {
	if g.finished {
		return g.finishErr
	}
	g.finished = true
	if g.wake >= 0 {
		inotify.Wake(g.wake)
		g.mu.Lock()
		done := g.done
		g.mu.Unlock()
		if done != nil {
			<-done
		}
	}
	err := g.Scan()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.errs = nil
	for _, h := range g.byPath {
		g.copy(h)
		g.drop(h)
	}
	g.finishErr = errors.Join(err, errors.Join(g.errs...))
	return g.finishErr
}

// Instance returns the guard's inotify instance (-1: none), for an init that hands it to its
// shim before it exits (execstage.ReportEnded): the kernel's release of its watches then
// holds up neither the init's exit nor the launch's end. Close still closes the guard's own
// descriptor.
func (g *Guard) Instance() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.in
}

// Close ends the guard as Finish does (unless Finish has) and releases everything. It returns
// the errors of the last pass.
func (g *Guard) Close() error {
	err := g.Finish()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, fd := range []*int{&g.store, &g.in, &g.wake} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	return err
}

func readlinkat(dir int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// readNames lists a folder's entries (without . and ..).
func readNames(dir int) ([]string, error) {
	d, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(d)
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(d, buf)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
