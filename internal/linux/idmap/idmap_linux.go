// Package idmap gives a thread of a root-run shim a view of the host's system folders in which
// host root owns nothing: each folder is replaced, in a mount namespace of the thread's own, by
// an idmapped clone of itself that shows the files of uid and gid 0 as Nobody's. A box started
// from that thread binds its system folders from this view, and its processes — host root
// without capabilities — then read there only what the "other" permission bits let an ordinary
// user read: the kernel's own permission checks keep /etc/shadow, ssh host keys or a 0600 file
// in /opt closed, not a list of masks (docs/security.md, "Root running agentbox").
package idmap

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Nobody is the uid and gid that files of host root (uid and gid 0) are shown as in the view.
// Every other owner is shown as no one (the overflow id): the idmapping maps only 0. A
// root-run box's processes keep host uid 0, which then owns nothing there.
const Nobody = 65534

// Enter moves the calling thread into a mount namespace of its own (a slave of the host's, so
// that the host's later mounts still reach it) in which each of dirs that exists as a directory
// (symbolic links are left alone: they lead to a folder that is in dirs itself) is covered by
// an idmapped clone of itself, submounts included. The caller must hold the thread
// (runtime.LockOSThread) for as long as it starts processes that are to see the view, and must
// be host root. An error names the folder and the reason; the thread's view may then be
// half-made, and the caller must start no box from it.
//
// As uid 0 of a user namespace other than the host's (a rootless container) there is nothing
// to do, and Enter returns nil: host root's files already show as the overflow id there, and
// the kernel's checks keep their root-only ones closed to every process of that namespace
// (capabilities in a user namespace do not reach files whose owner it does not map), as for
// an ordinary user.
func Enter(dirs []string) error {
	if os.Geteuid() != 0 {
		return errors.New("idmapped system folders: only host root needs and can make them")
	}
	if initial, err := InitialUserNS(); err != nil {
		return fmt.Errorf("idmapped system folders: %w", err)
	} else if !initial {
		return nil
	}
	userns, err := mappingNamespace()
	if err != nil {
		return fmt.Errorf("idmapped system folders: %w (running boxes needs user namespaces)", err)
	}
	defer unix.Close(userns)
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("idmapped system folders: new mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("idmapped system folders: make / a slave: %w", err)
	}
	for _, d := range dirs {
		fi, err := os.Lstat(d)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return fmt.Errorf("idmapped system folder %s: %w", d, err)
		}
		if !fi.IsDir() {
			continue
		}
		if err := cover(d, userns); err != nil {
			return fmt.Errorf("idmapped system folder %s: %w", d, err)
		}
	}
	return nil
}

// cover attaches an idmapped clone of dir (recursive) over dir.
func cover(dir string, userns int) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		var st unix.Statfs_t
		fs := ""
		if unix.Statfs(dir, &st) == nil {
			fs = fmt.Sprintf(" (filesystem type %#x)", st.Type)
		}
		return fmt.Errorf("mount_setattr(MOUNT_ATTR_IDMAP): %w: the filesystem of %s or of a mount beneath it%s cannot be idmapped; run agentbox as an ordinary user", err, dir, fs)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// mappingNamespace returns a descriptor of a new user namespace whose only mapping is 0 →
// Nobody (uids and gids), the idmapping of the view.
func mappingNamespace() (int, error) {
	return namespace([]syscall.SysProcIDMap{{ContainerID: 0, HostID: Nobody, Size: 1}})
}

// namespace returns a descriptor of a new user namespace with maps as its uid and its gid
// mappings. A user namespace lives while a process or a descriptor holds it: a child is
// started in it, stopped by ptrace at its exec before it runs anything, its namespace opened,
// and the child killed and reaped. The caller's thread must be locked (ptrace requests come
// from the tracing thread).
func namespace(maps []syscall.SysProcIDMap) (int, error) { return namespaceOf(maps, maps) }

// OwnNamespace returns a new user namespace, owned by the caller, whose only mappings are the
// caller's uid and gid to themselves: the box's user namespace of an ordinary user's bwrap
// (bwrap --userns), made here so that the box's pid namespace, which bwrap makes in it, is
// owned by it, and bwrap-init can write the box's counts there (user.max_inotify_instances),
// where bwrap's own --unshare-user nests the box in a second namespace that cannot.
func OwnNamespace() (*os.File, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fd, err := namespaceOf([]syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}},
		[]syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}})
	if err != nil {
		return nil, fmt.Errorf("the box's user namespace: %w", err)
	}
	return os.NewFile(uintptr(fd), "userns"), nil
}

// namespaceOf is namespace with uids and gids as the uid and the gid mappings.
func namespaceOf(uids, gids []syscall.SysProcIDMap) (int, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return -1, err
	}
	defer null.Close()
	cmd := &exec.Cmd{
		Path:   "/proc/self/exe",
		Args:   []string{"agentbox-idmap"},
		Env:    []string{},
		Dir:    "/",
		Stdin:  null,
		Stdout: null,
		Stderr: null,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: uids,
			GidMappings: gids,
			Ptrace:      true,
			Pdeathsig:   syscall.SIGKILL,
		},
	}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("start a process in the mapping's user namespace: %w", err)
	}
	fd, oerr := unix.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if kerr := cmd.Process.Kill(); kerr != nil && oerr == nil {
		oerr = fmt.Errorf("kill the mapping's process: %w", kerr)
	}
	cmd.Wait() // killed: its status says nothing
	if oerr != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("open the mapping's user namespace: %w", oerr)
	}
	return fd, nil
}

// InitialUserNS reports whether the calling process is in the host's user namespace: its
// uid_map maps every uid to itself (a namespace of a container maps a range, or less).
func InitialUserNS() (bool, error) {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false, err
	}
	f := strings.Fields(string(b))
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295", nil
}
