package mount

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/inotify"
)

// stagedCopy is the staged copy of a protected file as the box writes it: a file alone on a
// tmpfs of its own, whose size bounds it at changes.MaxFile bytes (a write beyond fails in the
// box with ENOSPC), where the host's copy (changes.Stage, on the disk of the state directory)
// had no bound. The copy is bound over the protected path; for a file of a git directory the
// tmpfs is mounted in the box at the spec's folder for it instead, and the protected path is a
// symlink to the copy there, so that a save by rename beside the copy (git's lock-and-rename of
// .git/config, which resolves the link first) replaces it. box-init copies it back to the
// host's copy, reading it by its name in the folder (a rename replaces the file), whenever the
// box has written it, and at the end (Keeper.SyncStaged), for the daemon to collect.
type stagedCopy struct {
	target string
	folder int // the tmpfs's root (O_RDONLY), where box-init reads the copy by name
	// box is the file last found at the copy's name, held open (read while it is still the one
	// there: the box may have taken its read permission away since).
	box  *os.File
	host *os.File // the host's copy
	dir  int      // O_PATH folder of the host's copy, for the truncated marker
	name string   // the host copy's name in dir
	full bool     // the box reached the bound (said once)
	// lost says the copy was last found removed, or not a regular file (said once): the last
	// content copied back is kept.
	lost bool
}

// truncatedSuffix marks, beside a host copy, that the box reached the bound (changes.Collect
// keeps the copy as a truncated change).
const truncatedSuffix = changes.TruncatedSuffix

// stagedName is the name of the copy on its tmpfs.
const stagedName = "copy"

// stagedInodes bounds the inodes of a staged copy's tmpfs: its folder, the copy, and the files
// a save beside it makes meanwhile (git's config.lock, an editor's temp file and backup).
const stagedInodes = 16

// onTmpfs makes the tmpfs copy of the host's staged copy source (a path) and returns the
// detached tmpfs (its root folder) holding it as stagedName, for stagedTree; the caller closes
// it once the copy is bound.
func (b *Root) onTmpfs(source, target string) (int, error) {
	host, err := os.OpenFile(source, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open staged copy %s: %w", source, err)
	}
	dir, err := unix.Open(filepath.Dir(source), unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		host.Close()
		return -1, fmt.Errorf("open staged copy folder: %w", err)
	}
	return b.copyOnTmpfs(host, dir, filepath.Base(source), target)
}

// copyOnTmpfs is onTmpfs for a host copy already open (read-write), with its folder (O_PATH)
// and its name there; it takes both descriptors, also on error.
func (b *Root) copyOnTmpfs(host *os.File, dir int, name, target string) (int, error) {
	fail := func(err error) (int, error) {
		host.Close()
		unix.Close(dir)
		return -1, err
	}
	fi, err := host.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return fail(fmt.Errorf("staged copy %s of %s is not a regular file (%v)", name, target, err))
	}
	// Not noexec: a staged hook or script (.husky/pre-commit) is run from its copy by the box's
	// own git, as it was from the host's file.
	mnt, err := newMount("tmpfs", "mode=0700,nr_inodes="+strconv.Itoa(stagedInodes)+",size="+strconv.Itoa(changes.MaxFile), unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fail(fmt.Errorf("staged copy tmpfs: %w", err))
	}
	folder, err := unix.Openat(mnt, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(mnt)
		return fail(fmt.Errorf("staged copy tmpfs: %w", err))
	}
	fd, err := unix.Openat(mnt, stagedName, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		unix.Close(folder)
		unix.Close(mnt)
		return fail(fmt.Errorf("staged copy on tmpfs: %w", err))
	}
	box := os.NewFile(uintptr(fd), stagedName)
	_, err = io.Copy(box, io.NewSectionReader(host, 0, fi.Size()))
	if err == nil {
		err = box.Chmod(fi.Mode().Perm())
	}
	if cerr := box.Close(); err == nil {
		err = cerr
	}
	// Held read-only: a file open for writing cannot be executed (ETXTBSY), and a staged hook
	// script is run from its copy by the box's own git. (Held read-write before, every staged
	// file failed to run in the box with "Text file busy".)
	if err == nil {
		fd, err = unix.Openat(mnt, stagedName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		box = os.NewFile(uintptr(fd), stagedName)
	}
	if err != nil {
		unix.Close(folder)
		unix.Close(mnt)
		return fail(fmt.Errorf("staged copy on tmpfs: %w", err))
	}
	b.staged = append(b.staged, &stagedCopy{target: target, folder: folder, box: box, host: host, dir: dir, name: name})
	return mnt, nil
}

// stagedTree returns a detached mount to move over m.Target for the staged copy on mnt, the
// detached tmpfs holding it (onTmpfs), and the in-box folder folder: without m.Folder, a clone
// of the copy itself (folder is unused, -1); with it, mnt is attached over folder (m.Folder, a
// mount point the spec made), and the mount is of a symlink to the copy there
// (m.Folder/copy). Both are nosuid and nodev; the caller closes the mount. A symlink is bound
// over a file of a git directory, not the copy itself: git's lock-and-rename then resolves the
// link and renames beside the copy, where the copy's tmpfs takes it, instead of over a mount
// point (EBUSY). The link lies on a tmpfs of its own that only the mount holds.
func stagedTree(mnt, folder int, m spec.Mount) (int, error) {
	var tree int
	if m.Folder == "" {
		var err error
		if tree, err = unix.OpenTree(mnt, stagedName, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err != nil {
			return -1, fmt.Errorf("open_tree staged copy: %w", err)
		}
	} else {
		if !filepath.IsAbs(m.Folder) || filepath.Clean(m.Folder) != m.Folder {
			return -1, fmt.Errorf("staged copy of %s: its folder %q is not a clean absolute path", m.Target, m.Folder)
		}
		if err := moveOnto(mnt, folder); err != nil {
			return -1, fmt.Errorf("attach staged copy at %s: %w", m.Folder, err)
		}
		linkFS, err := newMount("tmpfs", "mode=0755,nr_inodes=2,size=4k", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
		if err != nil {
			return -1, fmt.Errorf("staged copy link: %w", err)
		}
		defer unix.Close(linkFS)
		if err := unix.Symlinkat(filepath.Join(m.Folder, stagedName), linkFS, "link"); err != nil {
			return -1, fmt.Errorf("staged copy link: %w", err)
		}
		if tree, err = unix.OpenTree(linkFS, "link", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return -1, fmt.Errorf("open_tree staged copy link: %w", err)
		}
	}
	if err := setAttr(tree, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
		unix.Close(tree)
		return -1, err
	}
	return tree, nil
}

// errNotRegular says the box put something other than a regular file where its copy was.
var errNotRegular = errors.New("not a regular file")

// sync copies the box's copy back to the host's: its content and permission bits, and a
// marker beside it once the box filled the tmpfs (what it wrote beyond is lost, as its write
// failed). It reports whether the bound was reached for the first time. The copy is read by
// its name, without following a symlink and only when it is a regular file: when the box
// removed it, or put something else there, the host's copy keeps the last content copied back
// and the error says so (once, until a regular file is there again).
func (c *stagedCopy) sync() (full bool, err error) {
	box, st, err := c.current()
	if err != nil {
		if c.lost {
			return false, nil
		}
		c.lost = true
		return false, fmt.Errorf("the box's copy of protected %s is gone or no longer a regular file (%v): its last content copied back is kept as the proposed change", c.target, err)
	}
	c.lost = false
	n, err := io.Copy(io.NewOffsetWriter(c.host, 0), io.NewSectionReader(box, 0, min(st.Size, changes.MaxFile)))
	if err != nil {
		return false, fmt.Errorf("copy back %s: %w", c.target, err)
	}
	if err := c.host.Truncate(n); err != nil {
		return false, fmt.Errorf("copy back %s: %w", c.target, err)
	}
	if err := c.host.Chmod(os.FileMode(st.Mode & 0o777)); err != nil {
		return false, fmt.Errorf("copy back %s: %w", c.target, err)
	}
	var sf unix.Statfs_t
	if c.full || unix.Fstatfs(c.folder, &sf) != nil || sf.Bavail > 0 {
		return false, nil
	}
	c.full = true
	mark, err := unix.Openat(c.dir, c.name+truncatedSuffix, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return true, fmt.Errorf("mark %s truncated: %w", c.target, err)
	}
	unix.Close(mark)
	return true, nil
}

// current returns the regular file at the copy's name and its status: the one held when it is
// still there, else the one there now, opened without following a symlink or blocking (a FIFO),
// and held from then on.
func (c *stagedCopy) current() (*os.File, unix.Stat_t, error) {
	var st, held unix.Stat_t
	if err := unix.Fstatat(c.folder, stagedName, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, st, errNotRegular
	}
	if unix.Fstat(int(c.box.Fd()), &held) == nil && held.Dev == st.Dev && held.Ino == st.Ino {
		return c.box, held, nil
	}
	fd, err := unix.Openat(c.folder, stagedName, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, err
	}
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		if err == nil {
			err = errNotRegular
		}
		return nil, st, err
	}
	c.box.Close()
	c.box = os.NewFile(uintptr(fd), stagedName)
	return c.box, st, nil
}

// SyncStaged copies each staged copy the box wrote back to the host's copy, and says so once for
// each that reached the bound (report). It follows the copies (inotify) until done is closed,
// then copies them all a last time: close done once the box's processes are gone. Should the
// copies not be followed, report says so and only the last copy is made.
func (k *Keeper) SyncStaged(done <-chan struct{}, report func(string)) {
	if len(k.staged) == 0 {
		return
	}
	sync := func(c *stagedCopy) {
		full, err := c.sync()
		if err != nil {
			report(err.Error())
		}
		if full {
			report(fmt.Sprintf("the box's copy of protected %s reached its bound of %d bytes: writes beyond it fail (no space left on device), and the change is kept truncated", c.target, changes.MaxFile))
		}
	}
	if err := k.follow(done, sync); err != nil {
		report("follow the staged copies: " + err.Error() + " (they are copied back when the box ends)")
		<-done
	}
	for _, c := range k.staged {
		sync(c)
	}
}

// follow calls sync for each staged copy the box writes, until done is closed. Its inotify
// instance stays open until Close (its release waits for the kernel: see there).
func (k *Keeper) follow(done <-chan struct{}, sync func(*stagedCopy)) error {
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	k.mu.Lock()
	k.followed = in
	k.mu.Unlock()
	// Each copy's folder is watched, for the events of the file at the copy's name: a save by
	// rename puts another file there (IN_MOVED_TO), and a removal or a rename away leaves none
	// (copied back, or found gone, syncAfter later like a write: an editor that moves the old
	// file away before it writes the new one is not reported mid-save).
	byWd := map[int32]*stagedCopy{}
	for _, c := range k.staged {
		wd, err := unix.InotifyAddWatch(in, "/proc/self/fd/"+strconv.Itoa(c.folder), unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_ATTRIB|unix.IN_MOVED_TO|unix.IN_MOVED_FROM|unix.IN_DELETE|unix.IN_CREATE|unix.IN_ONLYDIR)
		if err != nil {
			return fmt.Errorf("%s: inotify: %w", c.target, err)
		}
		byWd[int32(wd)] = c
	}
	wake, err := inotify.NewWake()
	if err != nil {
		return err
	}
	defer unix.Close(wake)
	go func() {
		<-done
		inotify.Wake(wake)
	}()
	buf := make([]byte, 64<<10)
	// A copy being written is copied back syncAfter after its first write, not at every
	// write: each copy back reads the whole file. A close after writing, a chmod or a rename
	// onto the copy's name is copied back at once.
	dirty := map[*stagedCopy]time.Time{}
	for {
		timeout := -1
		for _, since := range dirty {
			if ms := int(time.Until(since.Add(syncAfter)).Milliseconds()) + 1; timeout < 0 || ms < timeout {
				timeout = max(ms, 0)
			}
		}
		woken, err := inotify.Wait(in, wake, timeout)
		if err != nil {
			<-done
			return nil
		}
		if woken {
			return nil
		}
		now := map[*stagedCopy]bool{}
		// A read error ends this drain only; the copies are all copied back at the end.
		_ = inotify.Drain(in, buf, func(ev inotify.Event) {
			c := byWd[ev.Wd]
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				for _, c := range k.staged {
					now[c] = true
				}
			case c == nil || ev.Name != stagedName:
			case ev.Mask&(unix.IN_CLOSE_WRITE|unix.IN_ATTRIB|unix.IN_MOVED_TO) != 0:
				now[c] = true
			case dirty[c].IsZero():
				dirty[c] = time.Now()
			}
		})
		for c, since := range dirty {
			if time.Since(since) >= syncAfter {
				now[c] = true
			}
		}
		for c := range now {
			delete(dirty, c)
			sync(c)
		}
	}
}

// syncAfter is how long after its first write a staged copy being written is copied back.
const syncAfter = 200 * time.Millisecond
