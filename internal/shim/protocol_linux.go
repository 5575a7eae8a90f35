package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/safesocket"
	"golang.org/x/sys/unix"
)

// writeTimeout bounds a write to a watcher, so a stuck daemon cannot wedge the shim.
const writeTimeout = 5 * time.Second

// relayedSignals are the signals a client may ask the shim to send the box.
var relayedSignals = map[syscall.Signal]bool{
	syscall.SIGINT: true, syscall.SIGTERM: true, syscall.SIGHUP: true, syscall.SIGQUIT: true,
	syscall.SIGUSR1: true, syscall.SIGUSR2: true, syscall.SIGWINCH: true, syscall.SIGCONT: true,
}

func (s *server) readControl(f *os.File) {
	defer s.advance(evControlClosed)
	defer f.Close()
	for {
		ev, fds, err := engine.RecvEvent(f)
		if err != nil {
			if !errors.Is(err, engine.ErrControlClosed) {
				s.log.Printf("control channel: %v", err)
			}
			return
		}
		switch ev.Kind {
		case engine.EventPTY:
			if len(fds) == 0 {
				s.log.Printf("pty event without a descriptor")
				continue
			}
			for _, fd := range fds[1:] {
				unix.Close(fd)
			}
			s.havePTY(fds[0])
		case engine.EventExec:
			closeFDs(fds)
			s.mu.Lock()
			s.status.Execd = true
			s.advanceLocked(evExec)
			s.status.ProgramPid = ev.Pid
			if s.status.State == api.StateStarting {
				s.status.State = api.StateRunning
			}
			s.broadcastLocked(EventExec)
			pending := s.pending
			s.pending = nil
			s.mu.Unlock()
			s.log.Printf("program exec'd (pid %d in the box)", ev.Pid)
			for _, sig := range pending {
				s.signalBox(sig)
			}
		case engine.EventEnded:
			s.mu.Lock()
			// box-init's inotify instances, handed over so that the kernel's release of
			// their watches (a grace period of milliseconds) holds up neither box-init's
			// exit nor the launch's end: held until box-init is reaped (its own copies are
			// closed by then, and are not the last), then closed in the background.
			s.handed = append(s.handed, fds...)
			if s.st.reaped {
				s.releaseHandedLocked()
			}
			take := s.topIsInit && s.status.Execd && !s.st.ended
			if take && s.st.phase < phaseExited {
				code := ev.Exit
				s.status.ExitCode = &code
			}
			if take {
				s.advanceLocked(evEnded)
			}
			s.mu.Unlock()
			if take {
				s.log.Printf("box ended (exit %d): its init exits", ev.Exit)
			} else {
				s.log.Printf("box end reported by a box whose top process is not its init, or before its exec: ignored")
			}
		case engine.EventError:
			closeFDs(fds)
			s.mu.Lock()
			if !s.status.Execd && s.errEvent == nil {
				s.errEvent = &api.Error{Code: ev.Code, Message: ev.Message}
			}
			s.mu.Unlock()
			s.log.Printf("box start-up failed: %s: %s", ev.Code, ev.Message)
		default:
			closeFDs(fds)
			s.log.Printf("unknown control event %q", ev.Kind)
		}
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// acceptLoop serves the socket: each connection is checked, then served by its role.
func (s *server) acceptLoop() {
	defer close(s.acceptEnded)
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Printf("accept: %v", err)
			}
			return
		}
		s.answering.Add(1)
		go s.serve(conn, sync.OnceFunc(s.answering.Done))
	}
}

// answerWait bounds how long finish waits for the connections accepted before it closed the
// socket to be answered (awaitAnswers). Each answer is itself bounded (the hello's read and
// every write by writeTimeout, a late client's close by waitClosed's 2 s).
const answerWait = 2*writeTimeout + 2*time.Second

// awaitAnswers waits, once the socket is closed, until every connection accepted before has
// been answered (at most answerWait). The shim's process ends soon after finish: a watcher
// that came while the final status was written waited for s.mu, and the process could exit
// before that watcher's goroutine sent it the launch's end; the daemon's watch then found the
// connection closed without a reply (shim TestLateWatcherFindsStatus, 4 of 40 runs under load;
// TestShimExitsAfterLateWatcherAnswered forces it).
func (s *server) awaitAnswers() {
	<-s.acceptEnded
	testHook(testHooks.awaitingAnswers)
	done := make(chan struct{})
	go func() {
		s.answering.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(answerWait):
		s.log.Printf("connections still unanswered %v after the socket closed", answerWait)
	}
}

// refuseConn answers conn with a refusal (code, msg) and closes it.
func refuseConn(conn *net.UnixConn, code, msg string) {
	conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	console.WriteJSONLine(conn, console.Reply{Error: &console.ReplyError{Code: code, Message: msg}})
	conn.Close()
}

// serve answers conn by its role; answered is called once conn has been answered (at the
// latest when serve returns).
func (s *server) serve(conn *net.UnixConn, answered func()) {
	defer answered()
	// Only a process of the shim's uid outside every box: a same-uid process in a box could
	// otherwise reach the socket through any path it can see.
	if err := safesocket.CheckPeer(conn); err != nil {
		s.log.Printf("refused connection: %v", err)
		refuseConn(conn, CodeForbidden, "refused: "+err.Error())
		return
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	conn.SetReadDeadline(time.Now().Add(writeTimeout))
	line, err := console.ReadLine(br)
	if err != nil {
		conn.Close()
		return
	}
	conn.SetReadDeadline(time.Time{})
	var h console.Hello
	if err := json.Unmarshal(line, &h); err != nil || h.Version != console.ProtocolVersion {
		refuseConn(conn, CodeBadHello, fmt.Sprintf("bad hello (want version %d)", console.ProtocolVersion))
		return
	}
	switch h.Role {
	case console.RoleAttach:
		s.serveAttach(conn, br, h, answered)
	case console.RoleWatch:
		s.serveWatch(conn, br, answered)
	case console.RoleListener:
		s.serveListener(conn, br)
	case console.RoleStatus:
		s.mu.Lock()
		reply := s.replyLocked()
		s.mu.Unlock()
		conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		console.WriteJSONLine(conn, reply)
		conn.Close()
	default:
		refuseConn(conn, CodeBadHello, fmt.Sprintf("unknown role %q", h.Role))
	}
}

func (s *server) replyLocked() console.Reply {
	b, _ := json.Marshal(s.status)
	return console.Reply{OK: true, Console: string(s.cfg.console()), Status: b}
}

// waitClosed waits (bounded) for the peer to close after the exit frame, so that the final
// frame is read before the shim's end of the socket disappears.
func waitClosed(c *net.UnixConn) {
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.Copy(io.Discard, c)
	c.Close()
}

func exitFrame(st *Status) []byte {
	var x console.Exit
	switch {
	case st.Error != nil:
		x.ErrorCode, x.Message = st.Error.Code, st.Error.Message
	case st.ExitCode != nil:
		x.Code = *st.ExitCode
	}
	b, _ := json.Marshal(x)
	return b
}

// attachment is the attached console client.
type attachment struct {
	conn  *net.UnixConn
	fw    *console.FrameWriter
	hello console.Hello
	done  chan struct{} // closed when its connection reader returns
	// writeFailed is done once when a write to the client failed (writeFailedToClient).
	writeFailed sync.Once
}

// writeFailedToClient is what a failed write to client c does: the connection's reader
// decides between a detach and a loss. A client that detached sent its detach frame and closed
// the connection, and the program's output may fail to reach it before the reader has read
// that frame; hanging the program up on the write error then ended a program the user had
// just detached from (e2e TestDetachAttach/ConfiguredKeys, seen once in a full run). The
// reader reads what is left, then fails at once on a closed connection (clientGone: SIGHUP),
// or within a second on a client that is alive but reads nothing.
func (s *server) writeFailedToClient(c *attachment, err error) {
	c.writeFailed.Do(func() {
		s.log.Printf("console client: write failed: %v", err)
		c.conn.SetReadDeadline(time.Now().Add(time.Second))
	})
}

// terminal reports whether the client's stream for frames of type t is a terminal.
func (c *attachment) terminal(t console.FrameType) bool {
	if t == console.FrameStderr {
		return c.hello.StderrTTY
	}
	return c.hello.StdoutTTY
}

func (s *server) serveAttach(conn *net.UnixConn, br *bufio.Reader, h console.Hello, answered func()) {
	if s.cfg.Detached && !s.tty {
		refuseConn(conn, CodeDetached, "the launch has no console to attach to: it was started with --detach without a terminal")
		return
	}
	c := &attachment{conn: conn, fw: console.NewFrameWriter(conn), hello: h, done: make(chan struct{})}
	defer close(c.done)
	s.mu.Lock()
	if s.st.phase == phaseFinal {
		st := s.status
		reply := s.replyLocked()
		s.mu.Unlock()
		console.WriteJSONLine(conn, reply)
		c.fw.WriteFrame(console.FrameExit, exitFrame(&st))
		waitClosed(conn)
		// A late client has had the end, and is gone.
		s.mu.Lock()
		s.advanceLocked(evAttach)
		s.advanceLocked(evDetach)
		s.mu.Unlock()
		return
	}
	// The reply is written under the lock, before the client is installed, so that it precedes
	// every frame.
	if err := console.WriteJSONLine(conn, s.replyLocked()); err != nil {
		s.mu.Unlock()
		conn.Close()
		return
	}
	old := s.client
	s.client = c
	s.advanceLocked(evAttach)
	if h.Size != (console.WindowSize{}) {
		s.size = h.Size
		if s.master != nil {
			setSize(s.master, h.Size)
		}
	}
	// A program that runs already drew its screen for an earlier terminal (or none): it is
	// asked to draw it again for this one (redraw).
	redraw := s.tty && s.status.Execd && s.st.phase < phaseExited
	s.mu.Unlock()
	answered() // the client is installed: finish sends it the end
	if redraw {
		go s.redraw()
	}
	if old != nil {
		s.log.Printf("console taken over by a new client")
		// A client that stopped reading must not hold up its successor.
		old.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		old.fw.WriteFrame(console.FrameDetach, nil)
		old.conn.Close()
	} else {
		s.log.Printf("console client attached")
	}

	for {
		testHook(testHooks.clientRead)
		f, err := console.ReadFrame(br)
		if err != nil {
			s.clientGone(c, "connection lost: "+err.Error())
			return
		}
		switch f.Type {
		case console.FrameStdin:
			if !s.isClient(c) {
				continue
			}
			s.sendStdin(stdinItem{data: f.Payload})
		case console.FrameStdinEOF:
			if !s.isClient(c) {
				continue
			}
			s.sendStdin(stdinItem{eof: true})
		case console.FrameResize:
			ws, err := console.ParseWindowSize(f.Payload)
			if err != nil || !s.isClient(c) {
				continue
			}
			s.mu.Lock()
			s.size = ws
			if s.master != nil {
				if err := setSize(s.master, ws); err != nil {
					s.log.Printf("resize: %v", err)
				}
			}
			s.mu.Unlock()
		case console.FrameSignal:
			if len(f.Payload) == 1 && s.isClient(c) {
				s.signalBox(syscall.Signal(f.Payload[0]))
			}
		case console.FrameDetach:
			s.mu.Lock()
			if s.client == c {
				s.client = nil
				s.advanceLocked(evDetach)
				s.log.Printf("console client detached")
			}
			s.mu.Unlock()
			conn.Close()
			return
		}
	}
}

func (s *server) isClient(c *attachment) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client == c
}

// clientGone handles the loss of a client's connection: if it was the attached client, the
// program gets SIGHUP, as from a terminal that closed.
func (s *server) clientGone(c *attachment, why string) {
	s.mu.Lock()
	if s.client != c {
		s.mu.Unlock()
		c.conn.Close()
		return
	}
	s.client = nil
	s.advanceLocked(evDetach)
	hup := s.box != nil && s.st.phase < phaseExited
	s.mu.Unlock()
	c.conn.Close()
	s.log.Printf("console client gone (%s)", why)
	if hup {
		s.log.Printf("hanging up the program: SIGHUP to the box")
		s.signalBox(syscall.SIGHUP)
	}
}

// watchConn is a watcher (the daemon).
type watchConn struct {
	conn *net.UnixConn
	mu   sync.Mutex
}

func (w *watchConn) send(v any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return console.WriteJSONLine(w.conn, v)
}

// broadcastLocked sends an event with the current status to every watcher. Called with s.mu
// held, so that events reach each watcher in order and after its reply.
func (s *server) broadcastLocked(kind string) {
	ev := Event{Kind: kind, Status: s.status}
	for w := range s.watchers {
		if err := w.send(ev); err != nil {
			s.log.Printf("watcher: %v", err)
			delete(s.watchers, w)
			s.advanceLocked(evUnwatch)
			// Not closed here: a watcher that sent a request and went away (the daemon's own
			// watch for a stop, closed at once) has its request read still. Closing the
			// connection dropped a stop not read yet, and the box ran on. serveWatch's reader
			// reads what is left, then ends at the end of the stream or the deadline, and closes.
			w.conn.SetReadDeadline(time.Now().Add(time.Second))
			testHook(testHooks.watchWriteFailed)
		}
	}
}

func (s *server) serveWatch(conn *net.UnixConn, br *bufio.Reader, answered func()) {
	w := &watchConn{conn: conn}
	testHook(testHooks.watchCame)
	s.mu.Lock()
	testHook(testHooks.watchLocked)
	if s.st.phase == phaseFinal {
		// The status no longer changes, and no broadcast reaches a watcher not installed: the
		// reply and the end are sent without the lock. finish waits for them (awaitAnswers).
		reply, end := s.replyLocked(), Event{Kind: EventExit, Status: s.status}
		s.mu.Unlock()
		testHook(testHooks.watchFinal)
		if err := w.send(reply); err != nil {
			conn.Close()
		} else {
			w.send(end)
			conn.CloseWrite()
		}
		answered()
		testHook(testHooks.watchEnded)
		return
	}
	if err := w.send(s.replyLocked()); err != nil {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.watchers[w] = true
	s.advanceLocked(evWatch)
	s.mu.Unlock()
	answered() // the watcher is installed: finish sends it the end
	for {
		if testHooks.watchRead != nil {
			testHooks.watchRead(conn)
		}
		line, err := console.ReadLine(br)
		if err != nil {
			s.mu.Lock()
			if s.watchers[w] {
				delete(s.watchers, w)
				s.advanceLocked(evUnwatch)
			}
			s.mu.Unlock()
			conn.Close()
			return
		}
		var r Request
		if err := json.Unmarshal(line, &r); err != nil {
			s.log.Printf("watcher: bad request: %v", err)
			continue
		}
		switch r.Op {
		case OpStop:
			s.stop()
		case OpSignal:
			s.signalBox(syscall.Signal(r.Signal))
		default:
			s.log.Printf("watcher: unknown op %q", r.Op)
		}
	}
}
