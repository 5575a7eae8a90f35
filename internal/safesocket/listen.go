package safesocket

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/linux/idmap"
)

// Listener is a unix-socket listener whose Accept returns only connections from the caller's
// own uid in the caller's own user namespace: a process of another user, or a same-uid process
// inside a box (another user namespace) that can see the socket path, is refused and closed.
type Listener struct {
	// Refused is called once for every refused connection with the reason (wrapping
	// ErrPeerRefused); nil means refusals are silent. It runs on the accepting goroutine.
	Refused func(err error)

	ul   *net.UnixListener
	path string
}

var _ net.Listener = (*Listener)(nil)

// Listen listens on the unix socket path, whose directory must pass CheckOwner (0700, the
// caller's). A socket already at path is removed only when it is the caller's and nobody
// listens on it (ErrInUse otherwise); anything else there is refused, never removed. The socket
// is made 0600 and removed when the listener closes. Callers serialize starts with a Lock.
func Listen(path string) (*Listener, error) {
	if err := CheckOwner(filepath.Dir(path), true); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := removeStale(path); err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	// The directory is 0700, so nobody else can reach the socket between bind and chmod.
	if err := os.Chmod(path, 0o600); err != nil {
		ul.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return &Listener{ul: ul, path: path}, nil
}

// removeStale removes a socket left at path by a process of ours that is gone.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("%w: %s is %s, not a socket; agentbox will not remove it", ErrBadMode, path, typeName(fi.Mode()))
	}
	owner, err := fileOwner(fi)
	if err != nil {
		return err
	}
	if owner != os.Getuid() {
		return fmt.Errorf("%w: socket %s belongs to uid %d, not to you (uid %d); agentbox will not remove it", ErrNotOwned, path, owner, os.Getuid())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: a process already listens on %s", ErrInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("probe stale socket: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	return nil
}

// Accept waits for the next connection from the caller's uid and user namespace and returns
// it as a *net.UnixConn. Refused connections are closed and reported to Refused.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.ul.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if err := CheckPeer(c); err != nil {
			if l.Refused != nil {
				l.Refused(err)
			}
			c.Close()
			continue
		}
		return c, nil
	}
}

// Close stops listening and removes the socket.
func (l *Listener) Close() error { return l.ul.Close() }

// Addr returns the socket's address.
func (l *Listener) Addr() net.Addr { return l.ul.Addr() }

// CheckPeerUID returns the pid of the process at the other end of c when it has the caller's
// uid (or, for host root, a box uid: OwnUID), and an error wrapping ErrPeerRefused otherwise. It is the whole check of the brokers'
// sockets, which a box's forwarder reaches from its own user namespace; the socket's 0700
// folder keeps other users out, this is the second lock. Where peer credentials are not
// available (not Linux) it refuses every connection.
func CheckPeerUID(c *net.UnixConn) (pid int, err error) {
	pid, uid, _, err := PeerCred(c)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrPeerRefused, err)
	}
	if !OwnUID(uid) {
		return 0, fmt.Errorf("%w: pid %d runs as uid %d, not uid %d", ErrPeerRefused, pid, uid, os.Getuid())
	}
	return pid, nil
}

// OwnUID reports whether a peer of uid is the caller or one of its boxes: the caller's uid, or
// for host root also a box uid (idmap.IsBoxUID), which only host root's boxes run as.
func OwnUID(uid int) bool {
	return uid == os.Getuid() || os.Getuid() == 0 && idmap.IsBoxUID(uid)
}

// CheckPeer returns nil when the process at the other end of c has the caller's uid and is in
// the caller's user namespace, and an error wrapping ErrPeerRefused (or the failure that kept
// it from deciding) otherwise.
func CheckPeer(c *net.UnixConn) error {
	pid, uid, _, err := PeerCred(c)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPeerRefused, err)
	}
	if uid != os.Getuid() {
		return fmt.Errorf("%w: pid %d runs as uid %d, not uid %d", ErrPeerRefused, pid, uid, os.Getuid())
	}
	same, err := ConnInSameUserNS(c)
	if err != nil {
		return fmt.Errorf("%w: pid %d: %w", ErrPeerRefused, pid, err)
	}
	if !same {
		return fmt.Errorf("%w: pid %d is in another user namespace (a process inside a box)", ErrPeerRefused, pid)
	}
	return nil
}
