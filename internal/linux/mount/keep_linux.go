package mount

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/agentbox/agentbox/internal/atomicfile"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/inotify"
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
	// protected says target is a protected path (a read-only bind or a staged copy), not a
	// folder on the way to one; beneath is the workspace it lies beneath ("" for a mask).
	protected bool
	beneath   string
	// guarded says the host removed target while the box ran: it is guarded since
	// (Keeper.Guard), never bound again.
	guarded bool
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
	// Guard, when set, guards a protected path of the workspace beneath that the host removed
	// or renamed away while the box ran (its bind goes with it): from then on, whatever
	// appears at the path — the box may create it — is moved out of the workspace
	// (changes.Guard.Add). Nil stops the box instead, and what appeared at the path is moved
	// aside (Quarantine).
	Guard func(path string, dir bool, beneath string) error

	kept   []keptMount
	gone   *removals
	staged []*stagedCopy
	// last is an eventfd that makes Run's loop make one more pass and return (Settle); ran is
	// closed when Run returns (nil until Run starts).
	last int
	mu   sync.Mutex
	ran  chan struct{}
	// followed is the inotify instance that follows the staged copies (SyncStaged), kept open
	// until Close (-1: none).
	followed int
}

// Watch starts watching the folders of the root's masks and read-only binds (inotify), before
// the program starts, so that Run tells a path the host removed from one it replaced. A box
// whose denied paths cannot be watched must not start: the error says what to raise.
func (b *Root) Watch() (*Keeper, error) {
	gone, err := newRemovals(b.kept)
	if err != nil {
		return nil, err
	}
	last, err := inotify.NewWake()
	if err != nil {
		gone.close()
		return nil, err
	}
	return &Keeper{kept: b.kept, gone: gone, staged: b.staged, last: last, followed: -1}, nil
}

// instances returns the keeper's inotify instances (the masks' folders, the staged copies).
func (k *Keeper) instances() []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	var fds []int
	for _, fd := range []int{k.gone.fd, k.followed} {
		if fd >= 0 {
			fds = append(fds, fd)
		}
	}
	return fds
}

// Close releases the keeper's inotify instances (the masks' folders, the staged copies) and its
// eventfd, once Run and SyncStaged have returned (or were never started). It is apart from
// their end because the kernel frees an inotify instance's watches only after a grace period
// (fsnotify waits for SRCU readers), several milliseconds: box-init reports the box's end
// first, and closes them while the shim and the daemon settle the launch.
func (k *Keeper) Close() {
	k.Settle() // Run's loop reads gone: it ends first
	k.gone.close()
	k.mu.Lock()
	followed := k.followed
	k.followed = -1
	k.mu.Unlock()
	for _, fd := range []int{followed, k.last} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	k.last = -1
}

// Run keeps the mounts in place until stop is called or Settle returns (see keepMounts); call
// it once.
func (k *Keeper) Run(report func(string), stop func(msg, removed string)) {
	k.mu.Lock()
	k.ran = make(chan struct{})
	ran := k.ran
	k.mu.Unlock()
	defer close(ran)
	keepMounts(k.kept, k.gone, k.last, k.Guard, report, stop)
}

// Settle makes Run's loop make a last pass over the mounts and return, and waits for it (at
// most 5 s), once the program's processes are gone: a removal on the host that the loop had not
// handled yet when the program exited — a box that wrote the path at once and ended — is
// handled (the path guarded, and what the box wrote there moved out by the guard's last pass)
// before the init exits. Before, it was not, and the box's file stayed on the host
// (enginetest's ProtectedPaths failed about once in four runs on a loaded machine). It does
// nothing when Run was never started.
func (k *Keeper) Settle() {
	k.mu.Lock()
	ran := k.ran
	k.mu.Unlock()
	if ran == nil {
		return
	}
	inotify.Wake(k.last)
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
	}
}

// keepMounts runs for the box's life: since Linux 3.18, when the host unlinks or renames over
// a file that is a mount point in another mount namespace (git's lock-and-rename of
// .git/config, an editor's atomic save), the mount there silently disappears. box-init polls
// its mount table (/proc/self/mountinfo signals a change with POLLPRI) and re-binds the new
// file onto itself as before (read-only for protected paths), or masks it again. When it
// cannot (the path is gone, is now a symlink, or changed kind) it calls stop, which ends the
// box: a protected path must never stay writable, nor a denied one readable or creatable.
// A path the host removed is passed to stop as removed: whatever the box may have created there
// before it noticed must not stay (see Quarantine). A protected path of the workspace that the
// host removed or renamed away (rm, git checkout, an editor's save that moves the old file
// away first) is never bound again either: the box may have created the file meanwhile, and a
// bind would leave it on the host. It is guarded instead (guard, see Keeper.Guard), and a
// folder on the way to one is left unbound (the guard covers what is beneath it). report
// receives a line for every re-bind, guard and failure.
// A readable last (an eventfd) makes it make one more pass and return.
func keepMounts(kept []keptMount, gone *removals, last int, guard func(path string, dir bool, beneath string) error, report func(string), stop func(msg, removed string)) {
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
	// meantime. (gone is released by Keeper.Close, not here: see there.)
	// guardRemoved guards k, a protected path (or a folder on the way to one) the host removed;
	// false means the box was stopped.
	guardRemoved := func(k *keptMount) bool {
		k.guarded = true
		if !k.protected {
			return true // the guards of the protected paths beneath it cover it
		}
		if guard == nil {
			stop(fmt.Sprintf("protected path %s removed on the host", k.target), k.target)
			return false
		}
		if err := guard(k.target, k.dir, k.beneath); err != nil {
			stop(fmt.Sprintf("protected path %s removed on the host, and guarding it failed: %v", k.target, err), k.target)
			return false
		}
		report(fmt.Sprintf("guarding %s (removed on the host): what appears there is kept as a proposed change", k.target))
		return true
	}
	rebinds := 0
	for final := false; ; {
		// A kept path removed or renamed away on the host (its own name or a folder's on the
		// way) makes every bind be checked by its path: a rename away takes the mounts along,
		// and their ids stay in the table.
		removals := gone.begin()
		ids, err := mountIDs(f)
		if err != nil {
			stop("read mount table: "+err.Error(), "")
			return
		}
		lost := removals
		for i := range kept {
			k := &kept[i]
			if k.guarded {
				continue
			}
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
			// A protected path of the workspace (or a folder on the way) the host removed: what
			// is there now may be the box's. It is guarded, never bound again.
			if removedBind(k, gone) {
				if !guardRemoved(k) {
					return
				}
				continue
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
				if k.mask && gone.removed(k.target) || removedBind(k, gone) {
					break
				}
				time.Sleep(rebindPause)
				id, err = rebind(k)
			}
			if err != nil && removedBind(k, gone) {
				if !guardRemoved(k) {
					return
				}
				continue
			}
			if err == nil && removedBind(k, gone) {
				// Removed while it was bound again: what was bound may be the box's. The bind
				// goes, and the path is guarded.
				if uerr := unmountAt(k.target, id); uerr != nil {
					stop(fmt.Sprintf("protected path %s removed on the host while it was bound again, and the bind cannot be undone: %v", k.target, uerr), k.target)
					return
				}
				if !guardRemoved(k) {
					return
				}
				continue
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
		if final {
			return
		}
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}, {Fd: int32(last), Events: unix.POLLIN}}
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
		final = fds[1].Revents != 0
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

// removedBind reports whether k is a bind of the workspace whose path the host removed or
// renamed away (or a folder on its way), and is not guarded yet.
func removedBind(k *keptMount, gone *removals) bool {
	return !k.mask && !k.guarded && k.beneath != "" && (gone.removedAt(k.target) || absent(k.target))
}

// unmountAt detaches the mount id from target, when it is still there.
func unmountAt(target string, id uint64) error {
	fd, err := openInBox(target)
	if err != nil {
		return nil // gone from the path: it covers nothing there
	}
	defer unix.Close(fd)
	if got, err := mountID(fd); err != nil || got != id {
		return err
	}
	return unix.Unmount("/proc/self/fd/"+strconv.Itoa(fd), unix.MNT_DETACH)
}

// absent reports whether nothing is at target now (nor at a folder on the way).
func absent(target string) bool {
	fd, err := openInBox(target)
	if err == nil {
		unix.Close(fd)
	}
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
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
// next session) would find it. What is there is moved into .agentbox-quarantined-N beside it, never
// deleted: a host tool that removed and re-created the file in that moment keeps its content.
//
// The wait for the others is bounded by quarantineWait: under load a killed writer can take
// seconds to go (it was 2 s; raised as a margin). With others still left when it has moved the
// path aside, it says so in its error. (e2e TestAttackDeniedFileMovedAwayOnHost once found the
// box's file at the path in a CI run at load 25-30, which was taken for a late write; the test
// then took a launch still recorded as "starting" for ended, and so looked while the box ran,
// before box-init had stopped it: docs/benchmarks.md, "Twentieth session".)
func Quarantine(path string) (string, error) {
	deadline := time.Now().Add(quarantineWait)
	for ns.OthersLeft() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	left := ns.OthersLeft()
	aside, err := quarantine(path)
	if err == nil && left {
		err = fmt.Errorf("processes of the box were still running %v after they were killed: what they write at %s after this was not moved aside", quarantineWait, path)
	}
	return aside, err
}

// quarantineWait bounds Quarantine's wait for the box's other processes to be gone.
const quarantineWait = 30 * time.Second

func quarantine(path string) (string, error) {
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
	aside, err := atomicfile.RenameAside(dir, name)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(path), aside), nil
}

// removals watches the folders holding masked paths for a masked name being deleted or moved away
// (inotify works on the folders' inodes, so it sees the host's changes through the binds).
type removals struct {
	fd    int
	dirs  map[int32]string // watch descriptor → folder
	names map[string]bool  // kept paths
	seen  map[string]bool  // kept paths removed
	// overflow says events were lost (since the current pass began, or in the pass before):
	// a watched mask or bind (names) not in place whose path holds no file or folder counts as
	// removed (see removed).
	overflow, passOverflow bool
	pending                bool // a kept path removed, or events lost, since the current pass began
}

func newRemovals(kept []keptMount) (*removals, error) {
	r := &removals{fd: -1, dirs: map[int32]string{}, names: map[string]bool{}, seen: map[string]bool{}}
	// Only a mask in a folder the box can write needs the watch: elsewhere (/etc) the box can
	// create nothing at the path.
	// The folders of the read-only binds are watched too, only to wake keepMounts: POLLPRI on
	// the mount table was seen not to come for a bind the host's rename removed either (git's
	// lock-and-rename of .git/config: TestHostReplacementRebound).
	// The folders of every bind in the workspace are watched for the host removing or renaming
	// away a protected path or a folder on the way to one (keepMounts guards it then).
	var masks []keptMount
	for _, k := range kept {
		var st unix.Statfs_t
		if (k.mask || k.readOnly || k.beneath != "") && unix.Statfs(filepath.Dir(k.target), &st) == nil && st.Flags&unix.ST_RDONLY == 0 {
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
		if k.mask || k.beneath != "" {
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

// removed reads the pending events and reports whether path was removed on the host: an event
// said so, or events were lost and path is a watched name that holds no file or folder now
// (nothing, or a symlink, which no host replacement of a bound file or folder makes). After lost
// events, a watched path that holds a file or folder is taken as replaced, as a path in an
// unwatched folder is (a root-run box's /etc/shadow): keepMounts binds or masks it again. Before,
// every watched path counted as removed then, so that the host's `git config` (a rename over
// .git/config) while events were lost had the host's new .git/config moved out of the workspace
// into the proposed changes, and a rename over a masked credential stopped the box
// (TestHostReplacementAfterLostEvents). What is at such a path cannot tell a replacement from a
// removal followed by the box's own file: that reading leaves the box's file in place, bound
// read-only, as the re-bind window after a replacement can (docs/integrity.md says so).
func (r *removals) removed(path string) bool {
	r.drain()
	p := filepath.Clean(path)
	return r.seen[p] || (r.overflow || r.passOverflow) && r.names[p] && !holdsFileOrFolder(p)
}

// holdsFileOrFolder reports whether a regular file or a folder is at the in-box path p (no
// symlink followed on the way or at its end).
func holdsFileOrFolder(p string) bool {
	fd, err := openInBox(p)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG || st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// removedAt is removed for path or any kept folder on its way.
func (r *removals) removedAt(path string) bool {
	if r.removed(path) {
		return true
	}
	for p := filepath.Dir(filepath.Clean(path)); p != "/" && p != "."; p = filepath.Dir(p) {
		if r.seen[p] {
			return true
		}
	}
	return false
}

// begin reads the pending events and starts a pass over the kept mounts: it reports whether a
// kept path was removed, or events were lost, since the last pass began (then every mount is
// to be checked by its path). Events lost before are taken into this pass only: once every
// mount was checked, those that were in place are known to be.
func (r *removals) begin() bool {
	r.drain()
	changed := r.pending
	r.passOverflow, r.overflow, r.pending = r.overflow, false, false
	return changed
}

// drain reads the pending events, recording the kept paths deleted or moved away (a creation
// or a move onto one only wakes keepMounts to look at its mounts).
func (r *removals) drain() {
	if r.fd >= 0 {
		buf := make([]byte, 64<<10)
		// A read error ends this drain only; the next one reads again.
		_ = inotify.Drain(r.fd, buf, func(ev inotify.Event) {
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				r.overflow, r.pending = true, true
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				// The watch ended: its folder was removed (or its file system went). What lay
				// beneath that folder is removed; the other watched paths are not (taking this
				// for lost events made every denied path count as removed, and a host's
				// `rm -rf .github` stopped the box: review 9, F5). A watch not known is lost
				// events.
				dir, ok := r.dirs[ev.Wd]
				if !ok {
					r.overflow, r.pending = true, true
					return
				}
				delete(r.dirs, ev.Wd)
				for p := range r.names {
					if p == dir || strings.HasPrefix(p, dir+"/") {
						r.seen[p], r.pending = true, true
					}
				}
				return
			}
			if dir, ok := r.dirs[ev.Wd]; ok && ev.Name != "" && ev.Mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0 {
				if p := filepath.Join(dir, ev.Name); r.names[p] {
					r.seen[p], r.pending = true, true
				}
			}
		})
	}
}

func (r *removals) close() {
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}
