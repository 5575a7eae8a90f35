package safesocket

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func fileOwner(fi fs.FileInfo) (int, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%w: no owner information", ErrNotSupported)
	}
	return int(st.Uid), nil
}

// PeerCred returns the process id, uid and gid of the process at the other end of conn, as
// the kernel recorded them at connect time (SO_PEERCRED), translated into the caller's pid and
// user namespaces.
func PeerCred(conn *net.UnixConn) (pid, uid, gid int, err error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, 0, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return 0, 0, 0, fmt.Errorf("peer credentials: %w", credErr)
	}
	return int(cred.Pid), int(cred.Uid), int(cred.Gid), nil
}

// ConnInSameUserNS reports whether the process at the other end of conn is in the caller's
// user namespace. It identifies the peer by the pidfd the kernel took at connect time
// (SO_PEERPIDFD, Linux 6.5) so that a peer that exits and whose pid is reused cannot pass for
// another process; on older kernels it falls back to PeerInSameUserNS with the SO_PEERCRED pid.
func ConnInSameUserNS(conn *net.UnixConn) (bool, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return false, fmt.Errorf("peer user namespace: %w", err)
	}
	var cred *unix.Ucred
	var credErr, pidfdErr error
	pidfd := -1
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		// The kernel may hand the pidfd out without O_CLOEXEC; hold ForkLock so that no
		// concurrent fork inherits it before it is marked.
		syscall.ForkLock.RLock()
		pidfd, pidfdErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
		if pidfdErr == nil {
			unix.CloseOnExec(pidfd)
		}
		syscall.ForkLock.RUnlock()
	}); err != nil {
		return false, fmt.Errorf("peer user namespace: %w", err)
	}
	if credErr != nil {
		return false, fmt.Errorf("peer user namespace: %w", credErr)
	}
	if pidfdErr != nil {
		// ENOPROTOOPT: a kernel before 6.5.
		return PeerInSameUserNS(int(cred.Pid))
	}
	defer unix.Close(pidfd)
	return sameUserNS(int(cred.Pid), pidfd)
}

// PeerInSameUserNS reports whether process pid is in the caller's user namespace, comparing
// /proc/<pid>/ns/user with /proc/self/ns/user. It holds a pidfd on pid across the comparison
// and checks that the process is still alive afterwards, so that a pid reused during the check
// is detected; a pid reused before the call cannot be, which is why a connection is better
// checked with ConnInSameUserNS.
func PeerInSameUserNS(pid int) (bool, error) {
	if pid <= 0 {
		return false, fmt.Errorf("peer user namespace: pid %d is not visible in this pid namespace", pid)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	switch {
	case errors.Is(err, unix.ENOSYS):
		pidfd = -1 // before Linux 5.3: compare without the liveness check
	case err != nil:
		return false, fmt.Errorf("peer user namespace: pid %d: %w", pid, err)
	default:
		defer unix.Close(pidfd)
	}
	return sameUserNS(pid, pidfd)
}

func sameUserNS(pid, pidfd int) (bool, error) {
	if pid <= 0 {
		return false, fmt.Errorf("peer user namespace: pid %d is not visible in this pid namespace", pid)
	}
	var self, peer unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &self); err != nil {
		return false, fmt.Errorf("peer user namespace: %w", err)
	}
	p := fmt.Sprintf("/proc/%d/ns/user", pid)
	if err := unix.Stat(p, &peer); err != nil {
		return false, fmt.Errorf("peer user namespace: %s: %w", p, err)
	}
	if pidfd >= 0 {
		// Still alive means pid still names the process the pidfd refers to, so what we read
		// above is its namespace.
		if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
			return false, fmt.Errorf("peer user namespace: pid %d exited during the check: %w", pid, err)
		}
	}
	return self.Dev == peer.Dev && self.Ino == peer.Ino, nil
}

func openLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
}

// unflock releases f's lock (flock(2) LOCK_UN), for every descriptor of its open file.
func unflock(f *os.File) {
	for errors.Is(unix.Flock(int(f.Fd()), unix.LOCK_UN), unix.EINTR) {
	}
}

func flock(f *os.File, wait bool) error {
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return ErrLocked
		default:
			return fmt.Errorf("flock: %w", err)
		}
	}
}
