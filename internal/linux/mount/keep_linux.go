package mount

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/inotify"
	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"golang.org/x/sys/unix"
)

// keptMount is a bind inside the workspace (a protected path bound read-only, or a writable
// parent bound onto itself) or a mask that box-init keeps in place.
type keptMount struct {
	target   string
	readOnly bool
	mask     bool // an empty read-only file or directory over target
	dir      bool
	id       uint64 // mount id (as in /proc/self/mountinfo)
}

// maxRebinds bounds the re-binds of one box: a host that keeps replacing protected files
// faster than box-init can follow stops the box instead of spinning.
const maxRebinds = 10000

// rebindTries and rebindPause bound how long box-init waits for a replaced path to settle.
const (
	rebindTries = 100
	rebindPause = 10 * time.Millisecond
)

// Keeper keeps a built root's protected binds and masks in place for the box's life (Run).
type Keeper struct {
	kept []keptMount
	gone *removals
}

// Watch starts watching the folders of the root's masks and read-only binds (inotify), before
// the program starts, so that Run tells a path the host removed from one it replaced. A box
// whose denied paths cannot be watched must not start: the error says what to raise.
func (b *Root) Watch() (*Keeper, error) {
	gone, err := newRemovals(b.kept)
	if err != nil {
		return nil, err
	}
	return &Keeper{kept: b.kept, gone: gone}, nil
}

// Run keeps the mounts in place until stop is called (see keepMounts); call it once.
func (k *Keeper) Run(report func(string), stop func(msg, removed string)) {
	keepMounts(k.kept, k.gone, report, stop)
}

// keepMounts runs for the box's life: since Linux 3.18, when the host unlinks or renames over
// a file that is a mount point in another mount namespace (git's lock-and-rename of
// .git/config, an editor's atomic save), the mount there silently disappears. box-init polls
// its mount table (/proc/self/mountinfo signals a change with POLLPRI) and re-binds the new
// file onto itself as before (read-only for protected paths), or masks it again. When it
// cannot (the path is gone, is now a symlink, or changed kind) it calls stop, which ends the
// box: a protected path must never stay writable, nor a denied one readable or creatable.
// A path the host removed is passed to stop as removed: whatever the box may have created there
// before it noticed must not stay (see Quarantine). report receives a line for every re-bind and failure.
func keepMounts(kept []keptMount, gone *removals, report func(string), stop func(msg, removed string)) {
	if len(kept) == 0 {
		return
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		stop("watch mount table: "+err.Error(), "")
		return
	}
	defer f.Close()
	// The host removing a masked path (rm, or a rename away) is told from its replacing it (a
	// rename over it) by the parent folder's inotify events (gone, set up before the program
	// started): after a removal, the file found at the path may be one the box created in the
	// meantime.
	defer gone.close()
	rebinds := 0
	for {
		gone.drain()
		ids, err := mountIDs(f)
		if err != nil {
			stop("read mount table: "+err.Error(), "")
			return
		}
		lost := false
		for i := range kept {
			k := &kept[i]
			// A mask is checked by its path at every wake: a rename away on the host takes
			// the mount along with the file, and its id stays in the table.
			if k.mask && isMountedAt(k) {
				continue
			}
			if !k.mask && ids[k.id] && !lost {
				continue
			}
			// Once one mount was lost, re-check the later ones (children go with a parent).
			if !k.mask && ids[k.id] && isMountedAt(k) {
				continue
			}
			lost = true
			rebinds++
			if rebinds > maxRebinds {
				stop(fmt.Sprintf("more than %d mounts lost: the host keeps replacing protected paths", maxRebinds), "")
				return
			}
			// A denied path the host removed (a logout) is never masked again: the box may have
			// created the file meanwhile. The box is stopped and what is there moved aside.
			if k.mask && gone.removed(k.target) {
				stop(fmt.Sprintf("denied path %s removed on the host", k.target), k.target)
				return
			}
			id, err := rebind(k)
			// The host may be mid-operation: a rename replaces the path at once, but an editor's
			// save may move the file away before it writes the new one. Try for a while (for a
			// mask, only while no removal is seen: see above).
			for try := 0; err != nil && try < rebindTries; try++ {
				if k.mask && gone.removed(k.target) {
					break
				}
				time.Sleep(rebindPause)
				id, err = rebind(k)
			}
			if err != nil {
				removed := ""
				if k.mask {
					removed = k.target
				}
				stop(fmt.Sprintf("protected mount %s lost (replaced or removed on the host) and cannot be re-bound: %v", k.target, err), removed)
				return
			}
			if k.mask && gone.removed(k.target) {
				// Removed while it was masked again: what was masked may be the box's.
				stop(fmt.Sprintf("denied path %s removed on the host", k.target), k.target)
				return
			}
			k.id = id
			if k.mask {
				report(fmt.Sprintf("masked %s again (replaced on the host)", k.target))
			} else {
				report(fmt.Sprintf("re-bound %s (replaced on the host)", k.target))
			}
		}
		if lost {
			continue // the table changed again with our own mounts: re-read before waiting
		}
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		if gone.fd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(gone.fd), Events: unix.POLLIN})
		}
		// POLLPRI was seen not to come for a mask the host's rename removed (a detach from
		// another namespace): the inotify watch on the masks' folders wakes box-init too.
		for {
			n, err := unix.Poll(fds, -1)
			if err != nil && !errors.Is(err, unix.EINTR) {
				stop("poll mount table: "+err.Error(), "")
				return
			}
			if n > 0 {
				break
			}
		}
	}
}

// mountIDs reads the mount ids in the mount table (reading it in full re-arms POLLPRI).
func mountIDs(f *os.File) (map[uint64]bool, error) {
	var buf bytes.Buffer
	b := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := f.ReadAt(b, off)
		buf.Write(b[:n])
		off += int64(n)
		if n == 0 || err != nil {
			break
		}
	}
	ids := map[uint64]bool{}
	for _, line := range strings.Split(buf.String(), "\n") {
		field, _, _ := strings.Cut(line, " ")
		if id, err := strconv.ParseUint(field, 10, 64); err == nil {
			ids[id] = true
		}
	}
	if len(ids) == 0 {
		return nil, errors.New("empty mount table")
	}
	return ids, nil
}

// isMountedAt reports whether k's mount is still what k.target resolves to.
func isMountedAt(k *keptMount) bool {
	fd, err := openInBox(k.target)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	id, err := mountID(fd)
	return err == nil && id == k.id
}

// openInBox opens an absolute in-box path without following any symlink.
func openInBox(target string) (int, error) {
	root, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(root)
	rel := strings.TrimPrefix(filepath.Clean(target), "/")
	return unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW, Resolve: uint64(resolveInBox)})
}

// rebind binds what k.target now is onto itself, as before, and returns the new mount id.
func rebind(k *keptMount) (uint64, error) {
	fd, err := openInBox(k.target)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if !k.dir {
			return 0, errors.New("a file became a directory")
		}
	case unix.S_IFREG:
		if k.dir {
			return 0, errors.New("a directory became a file")
		}
	default:
		return 0, errors.New("neither a file nor a directory")
	}
	if k.mask {
		return maskOnto(fd, k.dir, -1)
	}
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return 0, fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	attrs := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if k.readOnly {
		attrs |= unix.MOUNT_ATTR_RDONLY
	}
	if err := setAttr(tree, attrs); err != nil {
		return 0, err
	}
	if err := moveOnto(tree, fd); err != nil {
		return 0, err
	}
	return mountID(tree)
}

// Quarantine moves aside what the box may have created at path, a protected or denied path the
// host removed while the box ran, once no process but box-init is left in the box: a box that
// watched for the removal could create the file before box-init noticed, and the host (the
// next session) would find it. What is there is renamed to path.agentbox-quarantined-N, never
// deleted: a host tool that removed and re-created the file in that moment keeps its content.
func Quarantine(path string) (string, error) {
	for i := 0; i < 200 && ns.OthersLeft(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	dir, err := openInBox(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	name := filepath.Base(path)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	aside, err := integrity.RenameAside(dir, name)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(path), aside), nil
}

// removals watches the folders holding masked paths for a masked name being deleted or moved away
// (inotify works on the folders' inodes, so it sees the host's changes through the binds).
type removals struct {
	fd       int
	dirs     map[int32]string // watch descriptor → folder
	names    map[string]bool  // kept paths
	seen     map[string]bool  // kept paths removed
	overflow bool             // events were lost: any mask not in place counts as removed
}

func newRemovals(kept []keptMount) (*removals, error) {
	r := &removals{fd: -1, dirs: map[int32]string{}, names: map[string]bool{}, seen: map[string]bool{}}
	// Only a mask in a folder the box can write needs the watch: elsewhere (/etc) the box can
	// create nothing at the path.
	// The folders of the read-only binds are watched too, only to wake keepMounts: POLLPRI on
	// the mount table was seen not to come for a bind the host's rename removed either (git's
	// lock-and-rename of .git/config: TestHostReplacementRebound).
	var masks []keptMount
	for _, k := range kept {
		var st unix.Statfs_t
		if (k.mask || k.readOnly) && unix.Statfs(filepath.Dir(k.target), &st) == nil && st.Flags&unix.ST_RDONLY == 0 {
			masks = append(masks, k)
		}
	}
	if len(masks) == 0 {
		return r, nil
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch the denied paths: inotify: %w (raise fs.inotify.max_user_instances, or end what holds them)", err)
	}
	r.fd = fd
	watched := map[string]bool{}
	for _, k := range masks {
		if k.mask {
			r.names[filepath.Clean(k.target)] = true
		}
		dir := filepath.Dir(filepath.Clean(k.target))
		if watched[dir] {
			continue
		}
		watched[dir] = true
		wd, err := unix.InotifyAddWatch(fd, dir, unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO|unix.IN_CREATE|unix.IN_DONT_FOLLOW|unix.IN_ONLYDIR)
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("watch the denied paths in %s: inotify: %w (raise fs.inotify.max_user_watches)", dir, err)
		}
		r.dirs[int32(wd)] = dir
	}
	return r, nil
}

// removed reads the pending events and reports whether path was removed on the host (or events
// were lost, so that it may have been).
func (r *removals) removed(path string) bool {
	r.drain()
	return r.overflow || r.seen[filepath.Clean(path)]
}

// drain reads the pending events, recording the kept paths deleted or moved away (a creation
// or a move onto one only wakes keepMounts to look at its mounts).
func (r *removals) drain() {
	if r.fd >= 0 {
		buf := make([]byte, 64<<10)
		// A read error ends this drain only; the next one reads again.
		_ = inotify.Drain(r.fd, buf, func(ev inotify.Event) {
			if ev.Mask&(unix.IN_Q_OVERFLOW|unix.IN_IGNORED) != 0 {
				r.overflow = true
			}
			if dir, ok := r.dirs[ev.Wd]; ok && ev.Name != "" && ev.Mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0 {
				if p := filepath.Join(dir, ev.Name); r.names[p] {
					r.seen[p] = true
				}
			}
		})
	}
}

func (r *removals) close() {
	if r.fd >= 0 {
		unix.Close(r.fd)
	}
}
