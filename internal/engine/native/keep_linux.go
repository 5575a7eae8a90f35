package native

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// keptMount is a bind inside the workspace (a protected path bound read-only, or a writable
// parent bound onto itself) that box-init keeps in place.
type keptMount struct {
	target   string
	readOnly bool
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

// keepMounts runs for the box's life: since Linux 3.18, when the host unlinks or renames over
// a file that is a mount point in another mount namespace (git's lock-and-rename of
// .git/config, an editor's atomic save), the mount there silently disappears. box-init polls
// its mount table (/proc/self/mountinfo signals a change with POLLPRI) and re-binds the new
// file onto itself as before (read-only for protected paths). When it cannot (the path is
// gone, is now a symlink, or changed kind) it calls stop, which ends the box: a protected path
// must never stay writable. report receives a line for every re-bind and failure.
func keepMounts(kept []keptMount, report func(string), stop func(string)) {
	if len(kept) == 0 {
		return
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		stop("watch mount table: " + err.Error())
		return
	}
	defer f.Close()
	rebinds := 0
	for {
		ids, err := mountIDs(f)
		if err != nil {
			stop("read mount table: " + err.Error())
			return
		}
		lost := false
		for i := range kept {
			k := &kept[i]
			if ids[k.id] && !lost {
				continue
			}
			// Once one mount was lost, re-check the later ones (children go with a parent).
			if ids[k.id] && isMountedAt(k) {
				continue
			}
			lost = true
			rebinds++
			if rebinds > maxRebinds {
				stop(fmt.Sprintf("more than %d mounts lost: the host keeps replacing protected paths", maxRebinds))
				return
			}
			id, err := rebind(k)
			// The host may be mid-operation: rename detaches the mount before the new file
			// takes the name, and "rm; create" leaves a moment without one. Try for a while.
			for try := 0; err != nil && try < rebindTries; try++ {
				time.Sleep(rebindPause)
				id, err = rebind(k)
			}
			if err != nil {
				stop(fmt.Sprintf("protected mount %s lost (replaced or removed on the host) and cannot be re-bound: %v", k.target, err))
				return
			}
			k.id = id
			report(fmt.Sprintf("re-bound %s (replaced on the host)", k.target))
		}
		if lost {
			continue // the table changed again with our own mounts: re-read before waiting
		}
		fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			stop("poll mount table: " + err.Error())
			return
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
