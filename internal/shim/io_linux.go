package shim

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/launchdir"
	"golang.org/x/sys/unix"
)

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
