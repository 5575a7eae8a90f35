package handoff

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	linuxfds "github.com/agentbox/agentbox/internal/linux/fds"
)

// Send hands c over on u: one message, Magic, with c's descriptor attached. The caller then
// closes its c and u; the daemon's duplicate of the descriptor keeps the connection open.
func Send(u *net.UnixConn, c syscall.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var n int
	var werr error
	if err := raw.Control(func(fd uintptr) {
		n, _, werr = u.WriteMsgUnix([]byte(Magic), unix.UnixRights(int(fd)), nil)
	}); err != nil {
		return err
	}
	if werr == nil && n != len(Magic) {
		werr = fmt.Errorf("handoff: short write (%d of %d bytes)", n, len(Magic))
	}
	return werr
}

// Listener wraps ln, a unix socket listener. A connection whose first message is a handover
// becomes the handed-over TCP connection; any other is served as it is.
func Listener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return c, nil
	}
	hc := &conn{unix: uc}
	hc.cur.Store(&inner{uc})
	return hc, nil
}

// ErrRefused is what reading a connection gives when its first message carried descriptors
// that are not a handover of a connected TCP socket; the connection is closed.
var ErrRefused = errors.New("handoff refused: not a handover of a connected TCP socket")

// conn is an accepted unix connection until its first read, which tells a handover (the
// handed-over connection is used from then on) from a client of its own.
type conn struct {
	unix    *net.UnixConn
	cur     atomic.Pointer[inner]
	decided bool   // the first read happened (read and set by the reading goroutine only)
	pending []byte // read by the first read beyond what its caller could take

	mu     sync.Mutex // deadlines and Close against the switch to the handed-over connection
	rd, wd time.Time
	closed bool
}

type inner struct{ net.Conn }

func (c *conn) current() net.Conn { return c.cur.Load().Conn }

func (c *conn) Read(p []byte) (int, error) {
	if !c.decided {
		c.decided = true
		return c.first(p)
	}
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.current().Read(p)
}

func (c *conn) first(p []byte) (int, error) {
	buf := p
	if len(buf) < 512 {
		buf = make([]byte, 512)
	}
	oob := make([]byte, unix.CmsgSpace(4)) // room for one descriptor: more are dropped (MSG_CTRUNC)
	n, oobn, flags, _, err := c.unix.ReadMsgUnix(buf, oob)
	if oobn == 0 && flags&unix.MSG_CTRUNC == 0 {
		// A client of its own.
		if len(buf) != len(p) {
			m := copy(p, buf[:n])
			c.pending = buf[m:n]
			return m, err
		}
		return n, err
	}
	fds := linuxfds.Rights(oob[:oobn])
	if len(fds) != 1 || flags&unix.MSG_CTRUNC != 0 || string(buf[:n]) != Magic {
		for _, fd := range fds {
			unix.Close(fd)
		}
		c.Close()
		return 0, ErrRefused
	}
	tc, err := adopt(fds[0])
	if err != nil {
		c.Close()
		return 0, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		tc.Close()
		return 0, net.ErrClosed
	}
	if !c.rd.IsZero() {
		tc.SetReadDeadline(c.rd)
	}
	if !c.wd.IsZero() {
		tc.SetWriteDeadline(c.wd)
	}
	c.cur.Store(&inner{tc})
	c.mu.Unlock()
	c.unix.Close()
	return tc.Read(p)
}

// adopt returns the connection of fd, which it closes, if fd is a connected TCP socket.
func adopt(fd int) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "handoff")
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, ErrRefused
	}
	for _, want := range []struct {
		opt  int
		ok   func(int) bool
		what string
	}{
		{unix.SO_DOMAIN, func(v int) bool { return v == unix.AF_INET || v == unix.AF_INET6 }, "domain"},
		{unix.SO_TYPE, func(v int) bool { return v == unix.SOCK_STREAM }, "type"},
		{unix.SO_PROTOCOL, func(v int) bool { return v == unix.IPPROTO_TCP }, "protocol"},
		{unix.SO_ACCEPTCONN, func(v int) bool { return v == 0 }, "listening"},
	} {
		v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, want.opt)
		if err != nil || !want.ok(v) {
			return nil, ErrRefused
		}
	}
	// Connected: it has a peer.
	if _, err := unix.Getpeername(fd); err != nil {
		return nil, ErrRefused
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	if _, ok := c.(*net.TCPConn); !ok {
		c.Close()
		return nil, ErrRefused
	}
	return c, nil
}

func (c *conn) Write(p []byte) (int, error) { return c.current().Write(p) }

func (c *conn) Close() error {
	c.mu.Lock()
	c.closed = true
	cur := c.current()
	c.mu.Unlock()
	err := cur.Close()
	if cur != net.Conn(c.unix) {
		c.unix.Close()
	}
	return err
}

// CloseWrite half-closes the connection (net/http's server does before it closes).
func (c *conn) CloseWrite() error {
	if cw, ok := c.current().(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.current().LocalAddr() }
func (c *conn) RemoteAddr() net.Addr { return c.current().RemoteAddr() }

func (c *conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rd, c.wd = t, t
	return c.current().SetDeadline(t)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rd = t
	return c.current().SetReadDeadline(t)
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wd = t
	return c.current().SetWriteDeadline(t)
}
