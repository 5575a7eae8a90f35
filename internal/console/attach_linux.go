package console

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/safesocket"
)

// AttachOptions tune Attach. The zero value is what `agentbox run` and `agentbox attach` use.
type AttachOptions struct {
	// NoSignals turns off forwarding of the client's SIGINT, SIGTERM, SIGHUP and SIGQUIT as
	// signal frames (and of SIGWINCH as resize frames). Zero: forwarded, and the client does not
	// die of them while attached.
	NoSignals bool
	// DetachKeys is the key sequence (ParseDetachKeys) that detaches the client and leaves the
	// program running: Attach sends a detach frame and returns ErrDetached. It is looked for
	// only in raw mode (a tty console on a terminal), where the keys are keystrokes. Nil: none.
	DetachKeys []byte
}

// ForwardedSignals are the signals Attach catches and forwards to the box.
var ForwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Conn is a connection to a shim socket after the hello exchange.
type Conn struct {
	*net.UnixConn
	// R buffers reads from the connection; read frames or lines through it, never the conn.
	R *bufio.Reader
	// Reply is the shim's answer to the hello.
	Reply Reply
}

// Dial verifies that socketPath and its directory belong to the caller, connects, verifies the
// listener's uid (SO_PEERCRED), sends hello and reads the reply. A refusal is a *ReplyError.
func Dial(socketPath string, hello Hello) (*Conn, error) {
	if err := CheckOwner(socketPath); err != nil {
		return nil, err
	}
	uc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socketPath, Net: "unix"})
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) {
			return nil, fmt.Errorf("%w: %s: %v", ErrShimGone, socketPath, err)
		}
		return nil, fmt.Errorf("connect %s: %w", socketPath, err)
	}
	c := &Conn{UnixConn: uc, R: bufio.NewReaderSize(uc, 64<<10)}
	if err := c.handshake(hello); err != nil {
		uc.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) handshake(hello Hello) error {
	_, uid, _, err := safesocket.PeerCred(c.UnixConn)
	if err != nil {
		return err
	}
	if uid != os.Getuid() {
		return fmt.Errorf("%w: listener runs as uid %d", ErrNotOwner, uid)
	}
	if hello.Version == 0 {
		hello.Version = ProtocolVersion
	}
	if err := WriteJSONLine(c, hello); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	line, err := ReadLine(c.R)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) {
			return fmt.Errorf("%w: closed before replying", ErrShimGone)
		}
		return fmt.Errorf("read reply: %w", err)
	}
	if err := json.Unmarshal(line, &c.Reply); err != nil {
		return fmt.Errorf("%w: reply: %v", ErrProtocol, err)
	}
	if !c.Reply.OK {
		if c.Reply.Error == nil {
			return fmt.Errorf("%w: refusal without an error", ErrProtocol)
		}
		return c.Reply.Error
	}
	return nil
}

// CheckOwner verifies that path is a socket owned by the caller's uid, in a directory owned by
// the caller that no one else can write (so no one else can have planted or swapped the socket).
func CheckOwner(path string) error {
	uid := uint32(os.Getuid())
	dir := filepath.Dir(path)
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: %s: %v", ErrShimGone, dir, err)
		}
		return fmt.Errorf("check %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%w: %s is not a directory", ErrNotOwner, dir)
	}
	if st.Uid != uid {
		return fmt.Errorf("%w: %s is owned by uid %d", ErrNotOwner, dir, st.Uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by others (mode %o)", ErrNotOwner, dir, st.Mode&0o7777)
	}
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: %s: %v", ErrShimGone, path, err)
		}
		return fmt.Errorf("check %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("%w: %s is not a socket", ErrNotOwner, path)
	}
	if st.Uid != uid {
		return fmt.Errorf("%w: %s is owned by uid %d", ErrNotOwner, path, st.Uid)
	}
	return nil
}

// Attach connects the caller's stdin, stdout and stderr to the console of a box through its
// shim socket, and returns when the launch ends. It returns the program's own exit code (every
// value, 125–127 included, is the program's), or a *StartError when the box failed before the
// program ran, or ErrDetached (the detach keys), or ErrTakenOver (another client attached), or
// another error when the connection failed.
//
// When the box has a tty console and stdin and stdout are terminals, the terminal is put in raw
// mode (restored on every return path), its size is sent with the hello and on SIGWINCH, and
// keys reach the program as bytes (Ctrl-C is the box's own line discipline's business). With
// plain streams, SIGINT, SIGTERM, SIGHUP and SIGQUIT the client receives are forwarded to the
// program, stdin EOF is passed on, and stdout and stderr stay separate and unchanged (apart from
// clipboard sequences the shim may drop).
func Attach(socketPath string, stdin, stdout, stderr *os.File, opts AttachOptions) (int, error) {
	inFd, outFd := int(stdin.Fd()), int(stdout.Fd())
	isTerm := term.IsTerminal(inFd) && term.IsTerminal(outFd)
	hello := Hello{Role: RoleAttach, StdoutTTY: term.IsTerminal(outFd), StderrTTY: term.IsTerminal(int(stderr.Fd()))}
	if isTerm {
		hello.Size = windowSize(outFd)
	}
	// Subscribing to signals costs a round trip to the runtime's signal thread per signal: it
	// runs while the connection is made, and is waited for before anything is forwarded.
	sigs := make(chan os.Signal, 8)
	subscribed := make(chan struct{})
	if opts.NoSignals {
		close(subscribed)
	} else {
		go func() {
			defer close(subscribed)
			signal.Notify(sigs, ForwardedSignals...)
			if isTerm {
				signal.Notify(sigs, syscall.SIGWINCH) // used in raw mode only (below)
			}
		}()
		defer func() {
			<-subscribed
			signal.Stop(sigs)
		}()
	}
	c, err := dialInterruptible(socketPath, hello, sigs, subscribed)
	if err != nil {
		return -1, err
	}
	defer c.Close()
	// When the program's output last asked the terminal something (unix ns; 0: never).
	var asked atomic.Int64
	if term.IsTerminal(inFd) {
		// Runs last (after the input copy stopped and the terminal mode was restored), on
		// every return: the exit, a detach, a takeover, an error.
		defer func() { flushInput(inFd, asked.Load()) }()
	}
	fw := NewFrameWriter(c)
	tty := c.Reply.Console == "tty"
	raw := tty && isTerm

	if raw {
		old, err := term.MakeRaw(inFd)
		if err != nil {
			return -1, fmt.Errorf("raw mode: %w", err)
		}
		defer term.Restore(inFd, old)
	}

	<-subscribed

	var keys []byte
	var size *sizer
	if raw {
		keys = opts.DetachKeys
		size = &sizer{fd: outFd, fw: fw, last: hello.Size}
	}
	in, err := startInput(stdin, fw, keys, size)
	if err != nil {
		return -1, err
	}
	defer in.stop()

	done := make(chan result, 1)
	go func() { done <- readOutput(c.R, stdout, stderr, &asked) }()

	for {
		select {
		case r := <-done:
			if in.detaching.Load() && errors.Is(r.err, ErrConnectionLost) {
				// The shim may close the connection of a detach before the input goroutine
				// has said that it sent the frame: wait for it to say.
				<-in.done
				select {
				case <-in.detached:
					return -1, ErrDetached
				default:
				}
			}
			return r.code, r.err
		case <-in.detached:
			// The shim has the detach frame (written before this): it closes the connection
			// without hanging the program up.
			return -1, ErrDetached
		case s := <-sigs:
			sig := s.(syscall.Signal)
			if sig == syscall.SIGWINCH {
				size.send() // nothing without raw mode
				continue
			}
			// A write error shows up as the reader's error.
			fw.WriteFrame(FrameSignal, []byte{byte(sig)})
		}
	}
}

// dialInterruptible dials the shim while a signal that would have ended a client not yet
// subscribed to it (SIGINT, SIGTERM, SIGHUP, SIGQUIT) still does: it is given back its
// default disposition and raised again, so that a shim that never answers cannot hold the
// client. (Ignored signals stay ignored: the client then keeps waiting.)
func dialInterruptible(socketPath string, hello Hello, sigs chan os.Signal, subscribed <-chan struct{}) (*Conn, error) {
	type dialed struct {
		c   *Conn
		err error
	}
	dc := make(chan dialed, 1)
	go func() {
		c, err := Dial(socketPath, hello)
		dc <- dialed{c, err}
	}()
	<-subscribed
	for {
		select {
		case d := <-dc:
			return d.c, d.err
		case s := <-sigs:
			sig := s.(syscall.Signal)
			if sig == syscall.SIGWINCH {
				continue
			}
			signal.Reset(sig)
			syscall.Kill(os.Getpid(), sig)
		}
	}
}

type result struct {
	code int
	err  error
}

func readOutput(r io.Reader, stdout, stderr *os.File, asked *atomic.Int64) result {
	var outDead, errDead bool
	for {
		f, err := ReadFrame(r)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, unix.ECONNRESET) {
				return result{-1, ErrConnectionLost}
			}
			return result{-1, fmt.Errorf("%w: %v", ErrConnectionLost, err)}
		}
		switch f.Type {
		case FrameStdout:
			// A reader that went away (`| head`) must not stall the box: keep draining.
			if !outDead {
				if asksTerminal(f.Payload) {
					asked.Store(time.Now().UnixNano())
				}
				if _, err := stdout.Write(f.Payload); err != nil {
					outDead = true
				}
			}
		case FrameStderr:
			if !errDead {
				if asksTerminal(f.Payload) {
					asked.Store(time.Now().UnixNano())
				}
				if _, err := stderr.Write(f.Payload); err != nil {
					errDead = true
				}
			}
		case FrameExit:
			var x Exit
			if err := json.Unmarshal(f.Payload, &x); err != nil {
				return result{-1, fmt.Errorf("%w: exit frame: %v", ErrProtocol, err)}
			}
			code, err := x.Result()
			return result{code, err}
		case FrameDetach:
			return result{-1, ErrTakenOver}
		}
	}
}

// flushInput discards what the terminal on fd has received but no one has read yet (TCIFLUSH).
// A program's output can make the terminal answer (a cursor position, a colour); an answer that
// arrives once the client has stopped copying its input, or a line not yet ended in cooked
// mode, would otherwise be read by the host's shell as typed by the user.
//
// When the program's output asked the terminal something shortly before (asked, unix ns: a
// cursor position, device attributes, a colour), the answer may still be on its way when the
// box has already ended: the flush waits for it, at most answerWait, and a quiet moment after
// it. Before, a box that ended right after printing ESC [6n had the terminal's answer typed
// into the host's shell (TestTerminal/Replies, once the box's end came sooner).
//
// A client in the background of its controlling terminal (`agentbox run … &`) leaves the input
// alone: it is the foreground's, and TCFLSH there would stop the client with SIGTTOU.
func flushInput(fd int, asked int64) {
	if pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err == nil && pgrp != unix.Getpgrp() {
		return
	}
	if asked != 0 && time.Since(time.Unix(0, asked)) < answerWait {
		wait := answerWait
		for {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(wait/time.Millisecond))
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || n == 0 {
				break
			}
			// Something arrived: flush it, and wait a little for the rest of the answer.
			unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
			wait = answerQuiet
		}
	}
	unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
}

// answerWait bounds how long the end of an attach waits for the terminal's answer to a query
// the program's output made; answerQuiet is the quiet after a part of it that ends the wait.
const (
	answerWait  = 200 * time.Millisecond
	answerQuiet = 20 * time.Millisecond
)

// asksTerminal reports whether b holds a sequence the terminal answers on its input: a device
// status report or device attributes request (CSI … n, CSI … c, also as the C1 CSI) or a colour
// query (OSC 4, 10, 11 or 12 with a ?).
func asksTerminal(b []byte) bool {
	for i := 0; i < len(b); i++ {
		var j int
		switch {
		case b[i] == 0x1b && i+1 < len(b) && b[i+1] == '[':
			j = i + 2
		case b[i] == 0xc2 && i+1 < len(b) && b[i+1] == 0x9b:
			j = i + 2
		case b[i] == 0x1b && i+1 < len(b) && b[i+1] == ']':
			if k := bytes.IndexAny(b[i+2:], "\x07\x1b"); k > 0 && bytes.Contains(b[i+2:i+2+k], []byte(";?")) {
				return true
			}
			continue
		default:
			continue
		}
		for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == ';' || b[j] == '?' || b[j] == '>' || b[j] == '=') {
			j++
		}
		if j < len(b) && (b[j] == 'n' || b[j] == 'c') {
			return true
		}
	}
	return false
}

// sizer sends the terminal's size to the shim when it differs from the size last sent. Both
// the SIGWINCH case of Attach and the input copy call it, the latter before it sends what it
// read: keys typed after a resize then reach the program after the resize, as they would on the
// terminal itself. The signal is handled on another goroutine, which on a loaded machine ran
// after the copy had sent the keys typed after the resize (TestTerminal/Resize: Enter, then the
// program's `stty size` showed the old size). A nil *sizer sends nothing (no raw mode).
type sizer struct {
	fd int
	fw *FrameWriter
	mu sync.Mutex // held from reading the size until its frame is written: sizes go out in order
	// last is the size the shim has (from the hello, then the last resize frame).
	last WindowSize
}

// send sends the terminal's size unless the shim has it already.
func (s *sizer) send() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := windowSize(s.fd)
	if ws == (WindowSize{}) || ws == s.last {
		return
	}
	// A write error shows up as the reader's error.
	if s.fw.WriteFrame(FrameResize, ws.Payload()) == nil {
		s.last = ws
	}
}

func windowSize(fd int) WindowSize {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return WindowSize{}
	}
	return WindowSize{Rows: ws.Row, Cols: ws.Col}
}

// input copies stdin to stdin frames. It polls stdin together with a wake-up pipe instead of
// blocking in read(2), so that Attach can stop it on return without leaving a reader behind that
// would steal the user's next keystroke, and without setting O_NONBLOCK on a descriptor the
// caller's shell shares.
type input struct {
	wakeR, wakeW *os.File
	done         chan struct{}
	// detaching is set once the detach keys were typed, before the detach frame is sent;
	// detached is closed once it has been sent.
	detaching atomic.Bool
	detached  chan struct{}
	keys      detachScanner
	once      sync.Once
}

// startInput starts copying stdin to fw; keys is the detach key sequence (nil: none); size, when
// not nil, sends a changed terminal size before what is read.
func startInput(stdin *os.File, fw *FrameWriter, keys []byte, size *sizer) (*input, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	in := &input{wakeR: r, wakeW: w, done: make(chan struct{}), detached: make(chan struct{}), keys: detachScanner{keys: keys}}
	go in.run(int(stdin.Fd()), fw, size)
	return in, nil
}

func (in *input) stop() {
	in.once.Do(func() {
		in.wakeW.Close()
		<-in.done
		in.wakeR.Close()
	})
}

func (in *input) run(fd int, fw *FrameWriter, size *sizer) {
	defer close(in.done)
	buf := make([]byte, 32<<10)
	var out []byte
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(in.wakeR.Fd()), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&(unix.POLLNVAL) != 0 {
			return
		}
		if fds[0].Revents == 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if n > 0 {
			size.send()
			var detach bool
			out, detach = in.keys.scan(out[:0], buf[:n])
			if len(out) > 0 && fw.WriteFrame(FrameStdin, out) != nil {
				return
			}
			if detach {
				in.detaching.Store(true)
				if fw.WriteFrame(FrameDetach, nil) == nil {
					close(in.detached)
				}
				return
			}
			continue
		}
		// EOF (or an error, which ends stdin just the same).
		fw.WriteFrame(FrameStdinEOF, nil)
		return
	}
}
