package handoff_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/handoff"
)

// pair returns the two ends of a loopback TCP connection: the client's and the accepted one.
func pair(t *testing.T) (client, accepted *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); a.Close() })
	return c.(*net.TCPConn), a.(*net.TCPConn)
}

// daemon returns a handoff listener on a new unix socket, and the socket's path.
func daemon(t *testing.T) (net.Listener, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "relay.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return handoff.Listener(ln), sock
}

func dial(t *testing.T, sock string) *net.UnixConn {
	t.Helper()
	u, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u.(*net.UnixConn)
}

func accept(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestHandover: the daemon's side reads and writes the handed-over connection itself, and
// the box's side (box-init) keeps nothing open.
func TestHandover(t *testing.T) {
	ln, sock := daemon(t)
	client, accepted := pair(t)
	u := dial(t, sock)
	if err := handoff.Send(u, accepted); err != nil {
		t.Fatal(err)
	}
	accepted.Close()
	u.Close()

	c := accept(t, ln)
	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if _, ok := c.RemoteAddr().(*net.TCPAddr); !ok {
		t.Errorf("remote address %v is not the TCP client's", c.RemoteAddr())
	}
	if _, err := c.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("client read %q, %v", buf, err)
	}
	// A half-close reaches the client.
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("after CloseWrite: %d, %v", n, err)
	}
}

// TestPlainClient: a client that speaks on the unix socket is served as it is, however small
// the reads of the server.
func TestPlainClient(t *testing.T) {
	ln, sock := daemon(t)
	u := dial(t, sock)
	msg := "GET /sandbox/anthropic/v1/models HTTP/1.1\r\nHost: relay\r\n\r\n"
	if _, err := u.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	c := accept(t, ln)
	var got []byte
	buf := make([]byte, 7)
	for len(got) < len(msg) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != msg {
		t.Fatalf("read %q", got)
	}
	if _, err := c.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(u).Peek(2); err != nil || string(line) != "ok" {
		t.Fatalf("client read %q, %v", line, err)
	}
}

// TestRefused: descriptors that are not a connected TCP socket, more than one, or a message
// that is not Magic are refused, closed, and the connection with them.
func TestRefused(t *testing.T) {
	ln, sock := daemon(t)
	tcpListener, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcpListener.Close()
	unconnected, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(unconnected)
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	_, tcp := pair(t)
	unixPeer := dial(t, sock)
	accept(t, ln) // unixPeer's

	fdOf := func(c syscall.Conn) int {
		raw, _ := c.SyscallConn()
		var out int
		raw.Control(func(fd uintptr) { out = int(fd) })
		return out
	}
	for _, tc := range []struct {
		name string
		msg  string
		fds  []int
	}{
		{"pipe", handoff.Magic, []int{int(pr.Fd())}},
		{"unix socket", handoff.Magic, []int{fdOf(unixPeer)}},
		{"listening TCP socket", handoff.Magic, []int{fdOf(tcpListener.(*net.TCPListener))}},
		{"unconnected TCP socket", handoff.Magic, []int{unconnected}},
		{"UDP socket", handoff.Magic, []int{fdOf(udp.(*net.UDPConn))}},
		{"two descriptors", handoff.Magic, []int{fdOf(tcp), fdOf(tcp)}},
		{"not the magic", "GET / HTTP/1.1\r\n\r\n", []int{fdOf(tcp)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := openFDs(t)
			u := dial(t, sock)
			if _, _, err := u.WriteMsgUnix([]byte(tc.msg), unix.UnixRights(tc.fds...), nil); err != nil {
				t.Fatal(err)
			}
			c := accept(t, ln)
			if _, err := c.Read(make([]byte, 4096)); !errors.Is(err, handoff.ErrRefused) {
				t.Fatalf("read: %v, want ErrRefused", err)
			}
			c.Close()
			u.Close()
			if after := openFDs(t); after != before {
				t.Errorf("%d descriptors open after, %d before", after, before)
			}
		})
	}
}
