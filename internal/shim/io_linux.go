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
	if s.tty && s.st.redrawing {
		s.advanceLocked(evDrawn)
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

// redrawWait bounds how long redraw waits for the program to draw at the size it moved to.
const redrawWait = 500 * time.Millisecond

// redraw makes a full-screen program that runs draw its screen again for a newly attached
// client. SIGWINCH alone does not: Node.js terminals (and with them Claude Code, Codex, Gemini,
// Copilot and OpenCode) and many other programs redraw only when the size they read differs
// from the last one, so an attach from a terminal of the same size left a blank screen until
// the program next wrote. The size moves one row for a moment: the program draws for it (its
// next output, or redrawWait), then gets the size back and draws again. Whatever a client set
// meanwhile is the size restored.
func (s *server) redraw() {
	s.mu.Lock()
	ws := s.size
	if s.master == nil || ws.Rows < 2 || s.st.redrawing {
		s.mu.Unlock()
		s.signalBox(syscall.SIGWINCH)
		return
	}
	s.advanceLocked(evRedraw)
	mine := s.st.redraws
	setSize(s.master, console.WindowSize{Rows: ws.Rows - 1, Cols: ws.Cols})
	s.mu.Unlock()
	s.signalBox(syscall.SIGWINCH)
	// Drawn: the pump ended this redraw's wait (evDrawn), and another redraw may wait since.
	s.pause(redrawWait, func(st state) bool { return !st.redrawing || st.redraws != mine })
	s.mu.Lock()
	if s.st.redrawing && s.st.redraws == mine {
		s.advanceLocked(evDrawn) // the program did not draw within redrawWait
	}
	if s.master != nil {
		setSize(s.master, s.size)
	}
	s.mu.Unlock()
	s.signalBox(syscall.SIGWINCH)
	// A program still drawing for the moved size can miss the signal for the size restored
	// (less did, now and then, under load: its screen stayed one row short until a key was
	// pressed). Once it had time to settle it is signalled once more: one that redraws on every
	// SIGWINCH draws again at the restored size, one that redraws only on a change does
	// nothing.
	if !s.pause(redrawWait, nil) {
		s.signalBox(syscall.SIGWINCH)
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
