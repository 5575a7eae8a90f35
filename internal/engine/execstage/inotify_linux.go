package execstage

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The share of the user's inotify instances and watches a box's programs may hold together:
// the kernel counts both per user (fs.inotify.max_user_instances, max_user_watches) and,
// beneath that, per user namespace (user.max_inotify_instances, max_inotify_watches), so the
// box's own counts keep a box that creates them until refused from leaving none to the user's
// other programs and launches.
const (
	inotifyShareDiv   = 4    // a quarter of the user's
	inotifyMin        = 16   // and never fewer instances than this
	inotifyMinWatches = 8192 // nor fewer watches
)

// inotifyCaps are the counts capInotify writes: the user's limit (beneath the proc mount), the
// box's own count and the least share.
var inotifyCaps = []struct {
	total, own string
	least      int
}{
	{"sys/fs/inotify/max_user_instances", "sys/user/max_inotify_instances", inotifyMin},
	{"sys/fs/inotify/max_user_watches", "sys/user/max_inotify_watches", inotifyMinWatches},
}

// capInotify writes the box's share of inotify instances and watches (inotifyShareDiv) into
// its user namespace's counts. The box's /proc/sys is read-only, so it goes through a proc mount of its
// own that is never attached anywhere (fsopen, fsmount), closed on return; both the mount and
// the write need capabilities in the box's user namespace (CAP_SYS_ADMIN, CAP_SYS_RESOURCE),
// which box-exec drops with every other before the program.
//
// An unprivileged bwrap runs the box in a user namespace nested in the one that owns its pid
// namespace, where no proc can be made (and its /proc/sys stays read-only): there the count is
// not written, and the box may take the user's instances (docs/security.md, "inotify
// instances").
func capInotify() error {
	if nested, err := nestedUserNS(); err != nil || nested {
		return err
	}
	fs, err := unix.Fsopen("proc", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen proc: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("create proc: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	defer unix.Close(mnt)
	for _, c := range inotifyCaps {
		total, err := readInt(mnt, c.total)
		if err != nil {
			return err
		}
		share := max(c.least, total/inotifyShareDiv)
		fd, err := unix.Openat(mnt, c.own, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", c.own, err)
		}
		_, err = unix.Write(fd, []byte(strconv.Itoa(share)+"\n"))
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("%s: write %d: %w", c.own, share, err)
		}
	}
	return nil
}

// readInt reads the number in the file at path beneath the directory descriptor dir.
func readInt(dir int, path string) (int, error) {
	fd, err := unix.Openat(dir, path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	defer unix.Close(fd)
	b := make([]byte, 32)
	n, err := unix.Read(fd, b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// nestedUserNS reports whether the calling process's user namespace is not the one that owns
// its pid namespace.
func nestedUserNS() (bool, error) {
	pidns, err := unix.Open("/proc/self/ns/pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("pid namespace: %w", err)
	}
	defer unix.Close(pidns)
	owner, err := unix.IoctlRetInt(pidns, unix.NS_GET_USERNS)
	if errors.Is(err, unix.EPERM) {
		return true, nil // the owner lies above the caller's user namespace
	}
	if err != nil {
		return false, fmt.Errorf("owner of the pid namespace: %w", err)
	}
	defer unix.Close(owner)
	var a, b unix.Stat_t
	if err := unix.Fstat(owner, &a); err != nil {
		return false, fmt.Errorf("owner of the pid namespace: %w", err)
	}
	if err := unix.Stat("/proc/self/ns/user", &b); err != nil {
		return false, fmt.Errorf("user namespace: %w", err)
	}
	return a.Dev != b.Dev || a.Ino != b.Ino, nil
}
