package shim

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/launchdir"
	"golang.org/x/sys/unix"
)

// havePTY takes the PTY master: applies the client's size and starts relaying.
func (s *server) havePTY(fd int) {
	if !s.tty {
		s.log.Printf("pty event in pipe mode: ignored")
		unix.Close(fd)
		return
	}
	// Non-blocking, so that the runtime poller serves it and Close unblocks a pending Read.
	if err := unix.SetNonblock(fd, true); err != nil {
		s.log.Printf("pty master: %v", err)
	}
	m := os.NewFile(uintptr(fd), "pty-master")
	s.mu.Lock()
	if s.master != nil {
		s.mu.Unlock()
		m.Close()
		s.log.Printf("second pty event: ignored")
		return
	}
	s.master = m
	s.outputs = append(s.outputs, m)
	s.advanceLocked(evOutput)
	if s.size != (console.WindowSize{}) {
		setSize(m, s.size)
	}
	s.mu.Unlock()
	go s.pump(m, console.FrameStdout)
	go s.writeStdin(m)
}

func setSize(m *os.File, ws console.WindowSize) error {
	return unix.IoctlSetWinsize(int(m.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
}

// pump relays one output stream of the box to the attached client. In tty mode, output while
// no client is attached goes to L/output.log, so that a program left running (detached) never
// blocks on its terminal. In pipe mode, with no client attached it waits for one, so that
// nothing is lost and the program feels the back-pressure a stopped terminal gives; once the
// box has exited, output without a client is dropped.
func (s *server) pump(src *os.File, t console.FrameType) {
	defer s.advance(evDrained)
	var ps pumpState
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			s.deliver(t, buf[:n], &ps)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrClosed) {
				s.log.Printf("read %s: %v", t, err)
			}
			return
		}
	}
}

// pumpState is what one pump keeps between its reads.
type pumpState struct {
	filter    console.ClipboardFilter
	out       []byte // scratch buffer for the filtered output
	logFailed bool   // L/output.log could not be opened: output while no client is attached is dropped
}

// deliver sends data to the client, through the pump's filter when the clipboard is denied and
// the stream is bound for a terminal (tty mode, or the client said its stream is a terminal).
func (s *server) deliver(t console.FrameType, data []byte, ps *pumpState) {
	s.mu.Lock()
	if !s.tty {
		s.awaitLocked(func(st state) bool { return st.client || st.phase >= phaseExited })
	}
	if s.tty {
		s.ptyReads++
		if s.st.redrawing {
			s.advanceLocked(evDrawn)
		}
	}
	c := s.client
	s.mu.Unlock()
	if c == nil {
		if s.logOut == nil && s.tty && !ps.logFailed {
			// Only this pump (the PTY's, tty mode has one) uses logOut once the box runs.
			f, err := os.OpenFile(filepath.Join(s.dir, launchdir.OutputFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				s.log.Printf("open %s: %v: output while no client is attached is dropped", launchdir.OutputFile, err)
				ps.logFailed = true
				return
			}
			s.logOut = f
		}
		if s.logOut == nil {
			return
		}
		if s.clip {
			data = ps.filter.Filter(ps.out[:0], data)
			ps.out = data
		}
		if _, err := s.logOut.Write(data); err != nil {
			s.log.Printf("write %s: %v", launchdir.OutputFile, err)
		}
		return
	}
	if s.clip && (s.tty || c.terminal(t)) {
		data = ps.filter.Filter(ps.out[:0], data)
	} else {
		data = append(ps.filter.Flush(ps.out[:0]), data...)
	}
	ps.out = data
	if len(data) == 0 {
		return
	}
	if err := c.fw.WriteFrame(t, data); err != nil {
		s.writeFailedToClient(c, err)
		testHook(testHooks.writeFailed)
	}
}

type stdinItem struct {
	data []byte
	eof  bool
}

// sendStdin hands what a client sent to writeStdin; it gives up once the launch is final.
func (s *server) sendStdin(it stdinItem) {
	for {
		_, changed, final := s.until(func(st state) bool { return st.phase == phaseFinal })
		if final {
			return
		}
		select {
		case s.stdinCh <- it:
			return
		case <-changed:
		}
	}
}

// writeStdin writes what clients send to the box's stdin (the PTY master in tty mode), so a
// client's connection reader never blocks on a program that does not read.
func (s *server) writeStdin(dst *os.File) {
	for {
		_, exited, over := s.until(func(st state) bool { return st.phase >= phaseExited })
		if over {
			return
		}
		var it stdinItem
		select {
		case it = <-s.stdinCh:
		case <-exited:
			continue // look again
		}
		if it.eof {
			if s.tty {
				continue // a terminal has no end of input to pass on
			}
			s.mu.Lock()
			w := s.stdinW
			s.stdinW = nil
			s.mu.Unlock()
			if w != nil {
				w.Close()
			}
			continue
		}
		if !s.tty {
			s.mu.Lock()
			closed := s.stdinW == nil
			s.mu.Unlock()
			if closed {
				continue
			}
		}
		if _, err := dst.Write(it.data); err != nil {
			// The program closed its stdin or the box is gone: discard input from now on.
			if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, os.ErrClosed) {
				s.log.Printf("write stdin: %v", err)
			}
		}
	}
}

// redrawWait bounds each of a redraw's waits for the program to draw at a size it moved to
// (a variable for tests whose program draws: they wait for it, however loaded the machine);
// redrawQuiet is the pause in the program's output that ends its drawing at the moved size.
var redrawWait = 500 * time.Millisecond

const redrawQuiet = 50 * time.Millisecond

// redraw makes a full-screen program that runs draw its screen again for a newly attached
// client. SIGWINCH alone does not: Node.js terminals (and with them Claude Code, Codex, Gemini,
// Copilot and OpenCode) and many other programs redraw only when the size they read differs
// from the last one, so an attach from a terminal of the same size left a blank screen until
// the program next wrote. The size moves one row for a moment: the program draws for it (its
// output, until it pauses redrawQuiet; without output, redrawWait), then gets the size back
// and draws again (its next output, or redrawWait). Whatever a client set meanwhile is the
// size restored.
//
// Each move of the size is signalled by the kernel alone: TIOCSWINSZ sends SIGWINCH to the
// terminal's foreground process group, as a terminal's resize does. The shim sends one of its
// own only where no size changes (no move possible), and once more when the program drew
// nothing after the size came back (a program that missed that signal). less loses a key that
// reaches its terminal within its wake-up from a SIGWINCH (the signal's handler jumps out of
// the read(2) that returned the key); the shim's own signal after each move, and a last one
// 500 ms after the size came back, reached less after it had drawn at the full size, and a key
// typed then was lost (e2e TestDetachAttach/FullScreenRedrawn: its "q" did not quit less in 5
// of 165 runs under load, 0 of 140 since; TestRedrawSignalsOncePerMove).
func (s *server) redraw() {
	s.mu.Lock()
	ws := s.size
	if s.master == nil || ws.Rows < 2 || s.st.redrawing {
		s.mu.Unlock()
		s.signalBox(syscall.SIGWINCH) // no size changes: the kernel sends no signal
		return
	}
	s.advanceLocked(evRedraw)
	mine := s.st.redraws
	setSize(s.master, console.WindowSize{Rows: ws.Rows - 1, Cols: ws.Cols})
	s.mu.Unlock()
	if s.pause(redrawWait, func(st state) bool { return !st.redrawing || st.redraws != mine }) {
		return
	}
	s.mu.Lock()
	drew := !s.st.redrawing || s.st.redraws != mine
	s.mu.Unlock()
	// A program still drawing for the moved size can miss the signal of the size given back
	// (less did under load, now and then: its screen stayed one row short until a key was
	// pressed, and that key was lost): the size comes back once its output paused.
	if drew && s.quiet() {
		return
	}
	s.mu.Lock()
	if s.st.redrawing && s.st.redraws == mine {
		s.advanceLocked(evDrawn) // the program did not draw within redrawWait
	}
	if s.master == nil || s.st.redrawing {
		// Another redraw moved the size since (a client attached meanwhile): it gives it back.
		s.mu.Unlock()
		return
	}
	s.advanceLocked(evRedraw)
	mine = s.st.redraws
	setSize(s.master, s.size)
	s.mu.Unlock()
	if s.pause(redrawWait, func(st state) bool { return !st.redrawing || st.redraws != mine }) {
		return
	}
	s.mu.Lock()
	missed := s.st.redrawing && s.st.redraws == mine
	if missed {
		s.advanceLocked(evDrawn)
	}
	s.mu.Unlock()
	if missed {
		// Nothing drawn at the size given back: the program missed its signal (or draws on
		// no signal, and ignores this one too).
		s.signalBox(syscall.SIGWINCH)
	}
}

// quiet waits until the PTY's output has paused for redrawQuiet (at most redrawWait), and
// reports whether the launch is final.
func (s *server) quiet() (final bool) {
	deadline := time.Now().Add(redrawWait)
	for {
		s.mu.Lock()
		n := s.ptyReads
		s.mu.Unlock()
		d := min(redrawQuiet, time.Until(deadline))
		if d <= 0 {
			return false
		}
		if s.pause(d, nil) {
			return true
		}
		s.mu.Lock()
		paused := s.ptyReads == n
		s.mu.Unlock()
		if paused {
			return false
		}
	}
}

// pause waits for d, until done holds for the launch's state (nil: never), or until the launch
// is final, and reports whether it is final.
func (s *server) pause(d time.Duration, done func(state) bool) (final bool) {
	expired, release := expiry(d)
	defer release()
	st, _ := s.await(func(st state) bool { return st.phase == phaseFinal || done != nil && done(st) }, expired)
	return st.phase == phaseFinal
}
