package shim

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// nsInode returns the inode number of namespace name ("pid", "user", …) of process pid.
func nsInode(pid int, name string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/%s", pid, name), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// checkPeer accepts a connection only from a process of the shim's own uid that is not inside a
// box: its user namespace must be the shim's. A same-uid process in a box could otherwise reach
// the socket through any path it can see.
func checkPeer(conn *net.UnixConn, ownUserNS uint64) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var credErr error
	pidfd := -1
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr == nil {
			if p, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
				pidfd = p
			}
		}
	}); err != nil {
		return err
	}
	if credErr != nil {
		return fmt.Errorf("peer credentials: %w", credErr)
	}
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("peer uid %d is not the shim's uid %d", cred.Uid, os.Getuid())
	}
	pid := int(cred.Pid)
	if pid <= 0 {
		// The peer's pid is not visible in the shim's pid namespace: it is not a host process.
		return errors.New("peer pid not visible from the shim")
	}
	userNS, err := nsInode(pid, "user")
	if err != nil {
		return fmt.Errorf("peer %d user namespace: %w", pid, err)
	}
	if pidfd >= 0 {
		// The pid may have been reused between the connect and the read above: the pidfd still
		// names the peer, so check that it is the process just read and still alive.
		if p, err := pidfdPid(pidfd); err != nil || p != pid {
			return fmt.Errorf("peer %d exited during the check", pid)
		}
		if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
			return fmt.Errorf("peer %d exited during the check", pid)
		}
	}
	if userNS != ownUserNS {
		return fmt.Errorf("peer %d is in another user namespace (a box)", pid)
	}
	return nil
}

// pidfdPid reads the pid a pidfd refers to from /proc/self/fdinfo (-1 once it has exited).
func pidfdPid(pidfd int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", pidfd))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no Pid in pidfd fdinfo")
}
