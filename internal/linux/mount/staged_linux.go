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
	"github.com/agentbox/agentbox/internal/inotify"
)

// stagedCopy is the staged copy of a protected file as the box writes it: a file alone on a
// tmpfs of its own, whose size bounds it at changes.MaxFile bytes (a write beyond fails in the
// box with ENOSPC), where the host's copy (changes.Stage, on the disk of the state directory)
// had no bound. box-init copies it back to the host's copy whenever the box has written it, and
// at the end (Keeper.SyncStaged), for the daemon to collect.
type stagedCopy struct {
	target string
	box    *os.File // the copy on the tmpfs, read and written by box-init
	host   *os.File // the host's copy
	dir    int      // O_PATH folder of the host's copy, for the truncated marker
	name   string   // the host copy's name in dir
	full   bool     // the box reached the bound (said once)
}

// truncatedSuffix marks, beside a host copy, that the box reached the bound (changes.Collect
// keeps the copy as a truncated change).
const truncatedSuffix = changes.TruncatedSuffix

// stagedName is the name of the copy on its tmpfs.
const stagedName = "copy"

// onTmpfs makes the tmpfs copy of the host's staged copy source (a path) and returns the
// detached tmpfs (its root folder) holding it as stagedName, to bind at the target; the caller
// closes it once the copy is bound.
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
	mnt, err := newMount("tmpfs", "mode=0700,nr_inodes=4,size="+strconv.Itoa(changes.MaxFile), unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fail(fmt.Errorf("staged copy tmpfs: %w", err))
	}
	fd, err := unix.Openat(mnt, stagedName, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		unix.Close(mnt)
		return fail(fmt.Errorf("staged copy on tmpfs: %w", err))
	}
	box := os.NewFile(uintptr(fd), stagedName)
	_, err = io.Copy(box, io.NewSectionReader(host, 0, fi.Size()))
	if err == nil {
		err = box.Chmod(fi.Mode().Perm())
	}
	if err != nil {
		box.Close()
		unix.Close(mnt)
		return fail(fmt.Errorf("staged copy on tmpfs: %w", err))
	}
	b.staged = append(b.staged, &stagedCopy{target: target, box: box, host: host, dir: dir, name: name})
	return mnt, nil
}

// sync copies the box's copy back to the host's: its content and permission bits, and a
// marker beside it once the box filled the tmpfs (what it wrote beyond is lost, as its write
// failed). It reports whether the bound was reached for the first time.
func (c *stagedCopy) sync() (full bool, err error) {
	fi, err := c.box.Stat()
	if err != nil {
		return false, err
	}
	n, err := io.Copy(io.NewOffsetWriter(c.host, 0), io.NewSectionReader(c.box, 0, min(fi.Size(), changes.MaxFile)))
	if err != nil {
		return false, fmt.Errorf("copy back %s: %w", c.target, err)
	}
	if err := c.host.Truncate(n); err != nil {
		return false, fmt.Errorf("copy back %s: %w", c.target, err)
	}
	if err := c.host.Chmod(fi.Mode().Perm()); err != nil {
		return false, fmt.Errorf("copy back %s: %w", c.target, err)
	}
	var st unix.Statfs_t
	if c.full || unix.Fstatfs(int(c.box.Fd()), &st) != nil || st.Bavail > 0 {
		return false, nil
	}
	c.full = true
	fd, err := unix.Openat(c.dir, c.name+truncatedSuffix, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return true, fmt.Errorf("mark %s truncated: %w", c.target, err)
	}
	unix.Close(fd)
	return true, nil
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
	byWd := map[int32]*stagedCopy{}
	for _, c := range k.staged {
		wd, err := unix.InotifyAddWatch(in, "/proc/self/fd/"+strconv.Itoa(int(c.box.Fd())), unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_ATTRIB)
		if err != nil {
			return fmt.Errorf("%s: inotify: %w", c.target, err)
		}
		byWd[int32(wd)] = c
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return err
	}
	defer unix.Close(wake)
	go func() {
		<-done
		one := [8]byte{1}
		unix.Write(wake, one[:])
	}()
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(in), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	// A copy being written is copied back syncAfter after its first write, not at every
	// write: each copy back reads the whole file. A close after writing, or a chmod, is copied
	// back at once.
	dirty := map[*stagedCopy]time.Time{}
	for {
		timeout := -1
		for _, since := range dirty {
			if ms := int(time.Until(since.Add(syncAfter)).Milliseconds()) + 1; timeout < 0 || ms < timeout {
				timeout = max(ms, 0)
			}
		}
		if _, err := unix.Poll(fds, timeout); err != nil && !errors.Is(err, unix.EINTR) {
			<-done
			return nil
		}
		if fds[1].Revents != 0 {
			return nil
		}
		now := map[*stagedCopy]bool{}
		// A read error ends this drain only; the copies are all copied back at the end.
		_ = inotify.Drain(in, buf, func(ev inotify.Event) {
			c := byWd[ev.Wd]
			switch {
			case c == nil:
			case ev.Mask&(unix.IN_CLOSE_WRITE|unix.IN_ATTRIB) != 0:
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
