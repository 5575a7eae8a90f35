package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	linuxfds "github.com/agentbox/agentbox/internal/linux/fds"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/launchdir"
)

// The relay's shared loopback listener (egress: allow, docs/security.md "The relay's loopback
// port across a daemon restart"). The daemon hands each such launch's shim a duplicate of the
// listening socket (HoldListener); the shim holds it, never accepts on it, until its launch
// ends. While no daemon runs the socket stays bound and listening, so no other process can
// bind its port; connections that arrive meanwhile wait in the socket's accept queue (at most
// its backlog, in the kernel, on no process's descriptors), and the next daemon takes a
// duplicate back from a running shim (TakeListener) and serves them, and every later one, on
// the very same socket.

// The one-byte requests of a RoleListener connection, sent after the shim's reply.
const (
	listenerHold = 'h' // with the listener's descriptor: hold it
	listenerGive = 'g' // send a duplicate of the held listener back
)

// listenerTimeout bounds each step of a RoleListener exchange, on both sides.
const listenerTimeout = 5 * time.Second

// serveListener serves a RoleListener connection (the daemon, checked by serve).
func (s *server) serveListener(conn *net.UnixConn, br *bufio.Reader) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(listenerTimeout))
	// The request must be read with its descriptor (ReadMsgUnix): nothing may have been read
	// past the hello into br, where a descriptor sent with it would have been lost.
	if br.Buffered() != 0 {
		refuseConn(conn, CodeBadHello, "listener: the request came before the reply")
		return
	}
	if err := console.WriteJSONLine(conn, console.Reply{OK: true}); err != nil {
		return
	}
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := conn.ReadMsgUnix(b[:], oob)
	fds := linuxfds.Rights(oob[:oobn])
	answer := func(err error, fd int) {
		r := console.Reply{OK: err == nil}
		if err != nil {
			r.Error = &console.ReplyError{Code: api.CodeBadRequest, Message: err.Error()}
			var e *api.Error
			if errors.As(err, &e) {
				r.Error.Code = e.Code
			}
		}
		line, _ := json.Marshal(r)
		var cmsg []byte
		if fd > 0 {
			cmsg = unix.UnixRights(fd)
		}
		if _, _, err := conn.WriteMsgUnix(append(line, '\n'), cmsg, nil); err != nil {
			s.log.Printf("relay listener: answer: %v", err)
		}
	}
	switch {
	case err != nil || n != 1:
		closeFDs(fds)
		return
	case flags&unix.MSG_CTRUNC != 0:
		closeFDs(fds)
		answer(errors.New("listener: more descriptors than one"), -1)
		return
	}
	switch b[0] {
	case listenerHold:
		if len(fds) != 1 {
			closeFDs(fds)
			answer(fmt.Errorf("listener: hold with %d descriptors, want the listener's alone", len(fds)), -1)
			return
		}
		fd := fds[0]
		unix.CloseOnExec(fd) // (received with MSG_CMSG_CLOEXEC already: no box process gets it)
		if err := CheckLoopbackListener(fd); err != nil {
			unix.Close(fd)
			answer(err, -1)
			return
		}
		s.mu.Lock()
		if s.st.phase == phaseFinal {
			s.mu.Unlock()
			unix.Close(fd)
			answer(&api.Error{Code: api.CodeNotFound, Message: "listener: the launch has ended"}, -1)
			return
		}
		old := s.relayLn
		s.relayLn = fd
		s.mu.Unlock()
		if old > 0 {
			unix.Close(old)
		}
		s.log.Printf("holding the relay's loopback listener while the box runs")
		answer(nil, -1)
	case listenerGive:
		closeFDs(fds)
		s.mu.Lock()
		dup := -1
		if s.relayLn > 0 {
			dup, err = unix.FcntlInt(uintptr(s.relayLn), unix.F_DUPFD_CLOEXEC, 3)
		}
		s.mu.Unlock()
		if dup < 0 {
			if err == nil {
				err = &api.Error{Code: api.CodeNotFound, Message: "listener: this shim holds none"}
			}
			answer(err, -1)
			return
		}
		answer(nil, dup)
		unix.Close(dup)
		s.log.Printf("handed the relay's loopback listener to a daemon")
	default:
		closeFDs(fds)
		answer(fmt.Errorf("listener: unknown request %q", b[0]), -1)
	}
}

// releaseRelayListener closes the held listener at the launch's end: its box expects it no
// more (the daemon has its own copy while it runs).
func (s *server) releaseRelayListener() {
	s.mu.Lock()
	fd := s.relayLn
	s.relayLn = -1
	s.mu.Unlock()
	if fd > 0 {
		unix.Close(fd)
	}
}

// CheckLoopbackListener reports whether fd is a listening TCP socket bound to a loopback
// address: what the relay's shared listener is, and all a shim holds or a daemon takes back.
// (Go's listeners are MPTCP sockets where the kernel offers it, which serve plain TCP.)
func CheckLoopbackListener(fd int) error {
	dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return fmt.Errorf("listener: not a socket: %w", err)
	}
	typ, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	proto, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	acc, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if (dom != unix.AF_INET && dom != unix.AF_INET6) || typ != unix.SOCK_STREAM || (proto != unix.IPPROTO_TCP && proto != unix.IPPROTO_MPTCP) || acc != 1 {
		return errors.New("listener: not a listening TCP socket")
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fmt.Errorf("listener: %w", err)
	}
	var ip net.IP
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		ip = a.Addr[:]
	case *unix.SockaddrInet6:
		ip = a.Addr[:]
	}
	if !ip.IsLoopback() {
		return fmt.Errorf("listener: bound to %v, not a loopback address", ip)
	}
	return nil
}

// listenerDial connects to the shim of the launch in launchDir as RoleListener.
func listenerDial(launchDir string) (*console.Conn, error) {
	c, err := console.Dial(filepath.Join(launchDir, launchdir.SocketFile), console.Hello{Role: console.RoleListener})
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(listenerTimeout))
	return c, nil
}

// listenerAnswer reads the shim's answer line and the descriptors sent with it.
func listenerAnswer(c *console.Conn) (console.Reply, []int, error) {
	var r console.Reply
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*4))
	var line []byte
	var fds []int
	for !bytes.HasSuffix(line, []byte("\n")) {
		// (the connection's buffered reader holds nothing: the shim wrote only its reply
		// before this request)
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		fds = append(fds, linuxfds.Rights(oob[:oobn])...)
		line = append(line, buf[:n]...)
		if err != nil || len(line) > len(buf) {
			closeFDs(fds)
			if err == nil {
				err = errors.New("answer too long")
			}
			return r, nil, fmt.Errorf("relay listener: read the shim's answer: %w", err)
		}
	}
	if err := json.Unmarshal(line, &r); err != nil {
		closeFDs(fds)
		return r, nil, fmt.Errorf("%w: listener answer: %v", console.ErrProtocol, err)
	}
	if !r.OK {
		closeFDs(fds)
		if r.Error == nil {
			return r, nil, fmt.Errorf("%w: refusal without an error", console.ErrProtocol)
		}
		return r, nil, r.Error
	}
	return r, fds, nil
}

// HoldListener hands the shim of the launch in launchDir a duplicate of ln, the relay's shared
// loopback listener, to hold until its launch ends. ln is not changed (its descriptor is read
// through SyscallConn, which leaves it non-blocking).
func HoldListener(launchDir string, ln syscall.Conn) error {
	rc, err := ln.SyscallConn()
	if err != nil {
		return fmt.Errorf("relay listener: %w", err)
	}
	c, err := listenerDial(launchDir)
	if err != nil {
		return fmt.Errorf("relay listener: hand it to the shim: %w", err)
	}
	defer c.Close()
	var serr error
	if err := rc.Control(func(fd uintptr) {
		_, _, serr = c.WriteMsgUnix([]byte{listenerHold}, unix.UnixRights(int(fd)), nil)
	}); err != nil {
		return fmt.Errorf("relay listener: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("relay listener: hand it to the shim: %w", serr)
	}
	_, fds, err := listenerAnswer(c)
	closeFDs(fds)
	return err
}

// TakeListener takes back a duplicate of the relay listener the shim of the launch in
// launchDir holds, checked (CheckLoopbackListener); the shim keeps its own. An error wrapping
// api.CodeNotFound's ReplyError means the shim holds none.
func TakeListener(launchDir string) (*os.File, error) {
	c, err := listenerDial(launchDir)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.Write([]byte{listenerGive}); err != nil {
		return nil, fmt.Errorf("relay listener: ask the shim: %w", err)
	}
	_, fds, err := listenerAnswer(c)
	if err != nil {
		return nil, err
	}
	if len(fds) != 1 {
		closeFDs(fds)
		return nil, fmt.Errorf("%w: the shim sent %d descriptors, want 1", console.ErrProtocol, len(fds))
	}
	if err := CheckLoopbackListener(fds[0]); err != nil {
		unix.Close(fds[0])
		return nil, err
	}
	return os.NewFile(uintptr(fds[0]), "relay listener"), nil
}
