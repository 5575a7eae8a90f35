package attack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/handoff"
)

// Attempts on the relay channel's connection handover (internal/handoff). box-init hands each
// connection it accepts on the relay's in-box port to the daemon over the launch's relay
// socket, which the program in the box can reach too: here the program speaks there itself,
// with the exact handover message and a descriptor that is no connected TCP socket, or with
// bytes that are no handover. The daemon must refuse each (close the connection, serve
// nothing), leave the object handed over untouched, keep no copy of it, and go on serving
// the relay.
func init() {
	attempts = append(attempts, handoffAttempts...)
}

var handoffAttempts = []Attempt{
	{Name: "handoff-pipe", Category: CategoryNetwork,
		Expect: "the daemon refuses either end of a pipe handed over the relay socket with the exact handover message: it closes the connection, writes nothing into the write end, reads nothing from the read end, keeps no copy, and keeps serving the relay",
		Run:    handoffPipe},
	{Name: "handoff-unix-socket", Category: CategoryNetwork,
		Expect: "the daemon refuses a unix socket (one end of a socketpair holding a request) handed over with the exact handover message: it closes the connection, reads nothing of the request, answers nothing on the socket, keeps no copy, and keeps serving the relay",
		Run:    handoffUnixSocket},
	{Name: "handoff-file", Category: CategoryNetwork,
		Expect: "the daemon refuses a regular file (opened read-write, holding a request) handed over with the exact handover message: it closes the connection, neither reads nor writes the file (offset and contents unchanged, also after the box ended), and keeps serving the relay",
		Run:    handoffFile, Check: checkHandoffFile},
	{Name: "handoff-tcp-listener", Category: CategoryNetwork,
		Expect: "the daemon refuses a listening TCP socket handed over with the exact handover message: it closes the connection, accepts nothing on the listener, keeps no copy (the port refuses connections once the box closed it), and keeps serving the relay",
		Run:    handoffTCPListener},
	{Name: "handoff-garbage", Category: CategoryNetwork,
		Expect: "bytes without a descriptor on the relay socket (garbage, the handover message alone) get at most a 4xx answer and a closed connection, and the daemon keeps serving the relay",
		Run:    handoffGarbage},
}

// relaySocketPath is the launch's relay socket as the box sees it (a variable for the
// attempts' own tests, which aim them at a daemon that takes every descriptor).
var relaySocketPath = "/run/agentbox/relay.sock"

// handoffWait bounds each wait for the daemon to close a connection or drop a copy of a
// descriptor. The daemon does both before the connection's end can be seen, so a box that
// holds waits not at all; only a breach makes an attempt wait this long.
var handoffWait = 10 * time.Second

// handoffRoute is a relay path no broker serves: a request for it with the box's pairing
// gets 404 not_found from the relay, past the pairing check.
const handoffRoute = "/" + marker + "handoff"

// handoffFileContent is what the handed-over file holds: a request, which a daemon that
// served the file as a connection would read and answer into the file.
const handoffFileContent = "GET " + handoffRoute + " HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n" + marker + "file\n"

// pairedRequest is a request with the box's pairing, which a daemon that served a descriptor
// as a connection would answer.
func pairedRequest() []byte {
	return []byte("GET " + handoffRoute + " HTTP/1.1\r\nHost: relay\r\nX-Agentbox-Pairing: " + os.Getenv("AGENTBOX_PAIRING") + "\r\nConnection: close\r\n\r\n")
}

// handOver connects to the relay socket and sends the handover message with fd attached, as
// box-init does. The caller reads the daemon's answer from the connection returned.
func handOver(fd int) (*net.UnixConn, error) {
	c, err := net.DialTimeout("unix", relaySocketPath, handoffWait)
	if err != nil {
		return nil, err
	}
	u := c.(*net.UnixConn)
	n, _, err := u.WriteMsgUnix([]byte(handoff.Magic), unix.UnixRights(fd), nil)
	if err == nil && n != len(handoff.Magic) {
		err = fmt.Errorf("short write (%d of %d bytes)", n, len(handoff.Magic))
	}
	if err != nil {
		u.Close()
		return nil, err
	}
	return u, nil
}

// refusedBy records how the daemon treated the connection of a handover: it must close it
// without a byte of answer. Bytes mean it served the connection (or the descriptor through
// it); a connection still open after handoffWait means it did not refuse.
func (r *result) refusedBy(what string, u *net.UnixConn) {
	defer u.Close()
	u.SetReadDeadline(time.Now().Add(handoffWait))
	b, err := io.ReadAll(io.LimitReader(u, 4096))
	switch {
	case len(b) > 0:
		r.fail("%s: the daemon answered on the connection (%q) instead of closing it", what, b)
	case errors.Is(err, os.ErrDeadlineExceeded):
		r.fail("%s: the connection was still open %s after the handover: the daemon did not refuse it", what, handoffWait)
	case err == nil, errors.Is(err, syscall.ECONNRESET):
		r.note("%s: the daemon closed the connection without a byte", what)
	default:
		r.fail("%s: reading the daemon's answer: %s", what, describe(err))
	}
}

// readWithin reads fd once it is readable, waiting at most handoffWait: it returns what it
// read (nil at end of file), or waited for nothing.
func readWithin(fd int) (b []byte, waited bool, err error) {
	deadline := time.Now().Add(handoffWait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, true, nil
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			continue
		}
		buf := make([]byte, 4096)
		m, err := unix.Read(fd, buf)
		if err != nil {
			return nil, false, err
		}
		return buf[:m], false, nil
	}
}

// nothingLeft records what a read of fd, the box's last end of something it handed over
// (the other end closed by the box), finds: end of file at once holds; bytes mean the daemon
// wrote there, a wait that it kept a copy of the other end.
func (r *result) nothingLeft(what string, fd int) {
	b, waited, err := readWithin(fd)
	switch {
	case err != nil:
		r.fail("%s: read: %s", what, describe(err))
	case waited:
		r.fail("%s: no end of file %s after the box closed its copy: the daemon keeps one", what, handoffWait)
	case len(b) > 0:
		r.fail("%s: the daemon wrote %q into it", what, b)
	default:
		r.note("%s: nothing written, and no copy kept (end of file)", what)
	}
}

// unread records whether the bytes the box queued on fd, want, are all still there and
// unchanged, and reads them back (a socket closed with bytes unread would reset its peer).
func (r *result) unread(what string, fd int, want []byte) {
	n, err := unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD: bytes queued for reading
	switch {
	case err != nil:
		r.fail("%s: FIONREAD: %s", what, describe(err))
		return
	case n != len(want):
		r.fail("%s: %d of the %d bytes the box queued are left: the daemon read the rest", what, n, len(want))
		return
	}
	got := make([]byte, len(want))
	for off := 0; off < len(got); {
		m, err := unix.Read(fd, got[off:])
		if err != nil || m == 0 {
			r.fail("%s: read back what the box queued: %d bytes (%v)", what, off, err)
			return
		}
		off += m
	}
	if !bytes.Equal(got, want) {
		r.fail("%s: the bytes the box queued changed: %q", what, got)
		return
	}
	r.note("%s: all %d bytes the box queued were left unread, unchanged", what, n)
}

// relayServes checks that the daemon serves the launch's relay: a request with the box's
// pairing gets past the pairing check to the relay's routing (404 not_found for a route no
// broker serves), on the in-box port (a connection box-init hands over) and on the relay
// socket itself. It reports whether both did.
func (r *result) relayServes(when string) bool {
	pairing := os.Getenv("AGENTBOX_PAIRING")
	if pairing == "" {
		r.fail("the box has no pairing of its own (AGENTBOX_PAIRING): the relay cannot be checked")
		return false
	}
	base := os.Getenv("AGENTBOX_RELAY_URL")
	if base == "" {
		base = "http://127.0.0.1:7080"
	}
	unixTransport := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", relaySocketPath)
	}}
	ok := true
	for _, via := range []struct {
		what string
		url  string
		rt   http.RoundTripper
	}{
		{"the in-box relay port", base + handoffRoute, &http.Transport{DisableKeepAlives: true}},
		{"the relay socket", "http://relay" + handoffRoute, unixTransport},
	} {
		req, err := http.NewRequest(http.MethodGet, via.url, nil)
		if err != nil {
			r.fail("%s: %v", via.what, err)
			ok = false
			continue
		}
		req.Header.Set("X-Agentbox-Pairing", pairing)
		resp, err := (&http.Client{Transport: via.rt, Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			r.fail("%s, %s: a request with the box's pairing failed: %v", when, via.what, err)
			ok = false
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !bytes.Contains(b, []byte(`"code":"not_found"`)) {
			r.fail("%s, %s: a request with the box's pairing got %d %s, not the relay's 404 not_found", when, via.what, resp.StatusCode, bytes.TrimSpace(b))
			ok = false
			continue
		}
		r.note("%s, %s: the relay answered a request with the box's pairing (404 not_found)", when, via.what)
	}
	return ok
}

func handoffPipe(c *Context) Observation {
	var r result
	if !r.relayServes("before the handovers") {
		return r.done()
	}
	// The write end: the daemon must write nothing into the pipe, and drop its copy.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		r.fail("pipe: %s", describe(err))
		return r.done()
	}
	if u, err := handOver(p[1]); err != nil {
		r.fail("hand over the write end of a pipe: %s", describe(err))
	} else {
		r.refusedBy("the write end of a pipe", u)
	}
	unix.Close(p[1])
	r.nothingLeft("the pipe whose write end was handed over", p[0])
	unix.Close(p[0])

	// The read end, with a request queued: the daemon must read none of it, and drop its copy.
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		r.fail("pipe: %s", describe(err))
		return r.done()
	}
	defer unix.Close(p[1])
	req := pairedRequest()
	if _, err := unix.Write(p[1], req); err != nil {
		r.fail("queue a request in a pipe: %s", describe(err))
		unix.Close(p[0])
		return r.done()
	}
	if u, err := handOver(p[0]); err != nil {
		r.fail("hand over the read end of a pipe: %s", describe(err))
	} else {
		r.refusedBy("the read end of a pipe holding a request", u)
	}
	r.unread("the pipe whose read end was handed over", p[0], req)
	unix.Close(p[0])
	// With no read end left a write fails (EPIPE), unless the daemon kept one.
	_, err := unix.Write(p[1], []byte("x"))
	r.deny("write into the pipe once the box closed its read end (a copy kept by the daemon would take it)", err)

	r.relayServes("after the handovers")
	return r.done()
}

func handoffUnixSocket(c *Context) Observation {
	var r result
	if !r.relayServes("before the handover") {
		return r.done()
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		r.fail("socketpair: %s", describe(err))
		return r.done()
	}
	kept, sent := fds[0], fds[1]
	defer unix.Close(kept)
	// A request waits on the end handed over: a daemon serving it would read and answer it.
	req := pairedRequest()
	if _, err := unix.Write(kept, req); err != nil {
		r.fail("queue a request on a socketpair: %s", describe(err))
		unix.Close(sent)
		return r.done()
	}
	if u, err := handOver(sent); err != nil {
		r.fail("hand over one end of a socketpair: %s", describe(err))
	} else {
		r.refusedBy("one end of a unix socketpair holding a request", u)
	}
	r.unread("the socket handed over", sent, req)
	unix.Close(sent)
	r.nothingLeft("the socketpair's other end", kept)

	r.relayServes("after the handover")
	return r.done()
}

func handoffFile(c *Context) Observation {
	var r result
	if !r.relayServes("before the handover") {
		return r.done()
	}
	ws := c.Targets.Workspace
	if ws == "" {
		ws, _ = os.Getwd()
	}
	p := filepath.Join(ws, marker+"handoff-file")
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o600)
	if err != nil {
		r.fail("create %s: %s", p, describe(err))
		return r.done()
	}
	r.fact("file", p)
	if _, err := unix.Write(fd, []byte(handoffFileContent)); err != nil {
		r.fail("write %s: %s", p, describe(err))
		unix.Close(fd)
		return r.done()
	}
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		r.fail("seek %s: %s", p, describe(err))
		unix.Close(fd)
		return r.done()
	}
	if u, err := handOver(fd); err != nil {
		r.fail("hand over a regular file: %s", describe(err))
	} else {
		r.refusedBy("a regular file opened read-write", u)
	}
	// The daemon's copy shares the open file's offset: a read or a write there moves it.
	switch off, err := unix.Seek(fd, 0, io.SeekCurrent); {
	case err != nil:
		r.fail("seek %s: %s", p, describe(err))
	case off != 0:
		r.fail("the file's offset is %d after the handover: the daemon read or wrote it", off)
	default:
		r.note("the file's offset is still 0")
	}
	unix.Close(fd)
	switch b, err := os.ReadFile(p); {
	case err != nil:
		r.fail("read %s: %s", p, describe(err))
	case string(b) != handoffFileContent:
		r.fail("%s changed after the handover: %q", p, b)
	default:
		r.note("%s is unchanged (%d bytes)", p, len(b))
	}

	r.relayServes("after the handover")
	return r.done()
}

// checkHandoffFile checks on the host, after the box ended, that the file handed over still
// holds what the box wrote: a copy the daemon kept could be written later.
func checkHandoffFile(h *Host, o Observation) error {
	p := o.Facts["file"]
	if p == "" {
		return errors.New("the box reported no file")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if string(b) != handoffFileContent {
		return fmt.Errorf("%s changed after the box ended: %q", p, b)
	}
	return nil
}

func handoffTCPListener(c *Context) Observation {
	var r result
	if !r.relayServes("before the handover") {
		return r.done()
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		r.fail("listen on 127.0.0.1: %s", describe(err))
		return r.done()
	}
	tl := ln.(*net.TCPListener)
	addr := tl.Addr().String()
	defer tl.Close()
	raw, err := tl.SyscallConn()
	if err != nil {
		r.fail("listener descriptor: %s", describe(err))
		return r.done()
	}
	var u *net.UnixConn
	if cerr := raw.Control(func(fd uintptr) { u, err = handOver(int(fd)) }); cerr != nil {
		err = cerr
	}
	if err != nil {
		r.fail("hand over a listening TCP socket: %s", describe(err))
	} else {
		r.refusedBy("a listening TCP socket ("+addr+")", u)
	}

	// The listener is still the box's alone: a connection to it is accepted here.
	conn, err := net.DialTimeout("tcp4", addr, handoffWait)
	if err != nil {
		r.fail("connect to the listener handed over: %s", describe(err))
	} else {
		tl.SetDeadline(time.Now().Add(handoffWait))
		a, err := tl.Accept()
		if err != nil {
			r.fail("a connection to the listener handed over did not reach the box (%s): the daemon accepted it", describe(err))
		} else {
			r.note("a connection to the listener handed over was accepted by the box")
			a.Close()
		}
		conn.Close()
	}
	// With the box's listener closed the port refuses connections, unless the daemon kept a
	// copy of it.
	tl.Close()
	conn, err = net.DialTimeout("tcp4", addr, handoffWait)
	r.deny("connect to "+addr+" once the box closed its listener (a copy kept by the daemon would accept)", err)
	if err == nil {
		conn.Close()
	}

	r.relayServes("after the handover")
	return r.done()
}

func handoffGarbage(c *Context) Observation {
	var r result
	if !r.relayServes("before the garbage") {
		return r.done()
	}
	for _, try := range []struct {
		what string
		msg  []byte
	}{
		{"binary garbage", []byte("\x00\xff\xfe\x01" + marker + "garbage\x00\x7f\r\n\r\n")},
		{"a line that is no request", []byte(marker + "garbage\r\n\r\n")},
		{"the handover message without a descriptor", []byte(handoff.Magic)},
		{"the handover message twice, without a descriptor", []byte(handoff.Magic + handoff.Magic)},
		{"a TLS client hello", []byte("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00")},
	} {
		conn, err := net.DialTimeout("unix", relaySocketPath, handoffWait)
		if err != nil {
			r.fail("%s: connect to the relay socket: %s", try.what, describe(err))
			continue
		}
		u := conn.(*net.UnixConn)
		if _, err := u.Write(try.msg); err != nil {
			r.fail("%s: send: %s", try.what, describe(err))
			u.Close()
			continue
		}
		// Nothing more comes: a daemon waiting for the rest of a line sees the end.
		u.CloseWrite()
		u.SetReadDeadline(time.Now().Add(handoffWait))
		b, err := io.ReadAll(io.LimitReader(u, 4096))
		u.Close()
		status := strings.SplitN(string(b), "\r\n", 2)[0]
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			r.fail("%s: the connection was still open %s later (answer so far: %q)", try.what, handoffWait, b)
		case err != nil && !errors.Is(err, syscall.ECONNRESET):
			r.fail("%s: reading the daemon's answer: %s", try.what, describe(err))
		case len(b) == 0:
			r.note("%s: the daemon closed the connection without a byte", try.what)
		case strings.HasPrefix(status, "HTTP/1.") && len(status) >= 12 && status[9] == '4':
			r.note("%s: %s, then the daemon closed the connection", try.what, status)
		default:
			r.fail("%s: the daemon answered %q", try.what, b)
		}
	}
	r.relayServes("after the garbage")
	return r.done()
}
