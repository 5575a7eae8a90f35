package shim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/creack/pty"
)

// TestTransitions pins the shim's transition table: every (phase, event) pair, the phase it
// leads to, or that it is refused.
func TestTransitions(t *testing.T) {
	const refused = phase(-1)
	// The events that keep the phase of a box that is there: attach, stop, detach, control
	// closed, output, drained, watch, unwatch.
	keep := func(p phase) []phase { return []phase{p, p, p, p, p, p, p, p} }
	// redraw, drawn: only for a program that has been exec'd.
	noRedraw := []phase{refused, refused}
	redraw := func(p phase) []phase { return []phase{p, p} }
	row := func(parts ...[]phase) []phase {
		var r []phase
		for _, p := range parts {
			r = append(r, p...)
		}
		return r
	}
	want := map[phase][]phase{
		//                      start         start held  release       exec          exit          init exit     ended    finish
		phaseWaiting: row([]phase{phaseStarted, phaseHeld, refused, refused, refused, refused, refused, phaseFinal},
			// attach, stop, detach; no control channel or output before the box; watch, unwatch
			[]phase{phaseWaiting, phaseWaiting, phaseWaiting, refused, refused, refused, phaseWaiting, phaseWaiting}, noRedraw),
		// An end the init reports comes after the program's exec only.
		phaseHeld:    row([]phase{refused, refused, phaseStarted, phaseExecd, phaseExited, phaseExited, refused, refused}, keep(phaseHeld), noRedraw),
		phaseStarted: row([]phase{refused, refused, phaseStarted, phaseExecd, phaseExited, phaseExited, refused, refused}, keep(phaseStarted), noRedraw),
		phaseExecd:   row([]phase{refused, refused, phaseExecd, phaseExecd, phaseExited, phaseExited, phaseExited, refused}, keep(phaseExecd), redraw(phaseExecd)),
		// The init is reaped after the end it reported, or its end read after its reaping.
		phaseExited: row([]phase{refused, refused, phaseExited, phaseExited, phaseExited, phaseExited, phaseExited, phaseFinal}, keep(phaseExited), redraw(phaseExited)),
		// No output stream opens once the launch is final; one still open may end.
		phaseFinal: row([]phase{refused, refused, phaseFinal, phaseFinal, phaseFinal, phaseFinal, phaseFinal, phaseFinal},
			[]phase{phaseFinal, phaseFinal, phaseFinal, phaseFinal, refused, phaseFinal, phaseFinal, phaseFinal}, redraw(phaseFinal)),
	}
	events := []event{evStart, evStartHeld, evRelease, evExec, evExit, evInitExit, evEnded, evFinish, evAttach, evStop, evDetach, evControlClosed, evOutput, evDrained, evWatch, evUnwatch, evRedraw, evDrawn}
	for from := phaseWaiting; from <= phaseFinal; from++ {
		if len(want[from]) != len(events) {
			t.Fatalf("the table for %v has %d events, want %d", from, len(want[from]), len(events))
		}
		for i, ev := range events {
			t.Run(from.String()+"/"+ev.String(), func(t *testing.T) {
				got, err := next(from, ev)
				if w := want[from][i]; w == refused {
					if err == nil || got != from {
						t.Errorf("next(%v, %v) = %v, %v; want refused, phase kept", from, ev, got, err)
					}
				} else if err != nil || got != w {
					t.Errorf("next(%v, %v) = %v, %v; want %v", from, ev, got, err, w)
				}
				if err == nil && got < from {
					t.Errorf("next(%v, %v) = %v goes back", from, ev, got)
				}
			})
		}
	}
	if len(transitions) != len(want) {
		t.Errorf("the table has %d phases, want %d", len(transitions), len(want))
	}
	// No event outside the list above is in the table.
	for from, moves := range transitions {
		allowed := 0
		for _, w := range want[from] {
			if w != refused {
				allowed++
			}
		}
		if len(moves) != allowed {
			t.Errorf("the table has %d moves from %v, want %d", len(moves), from, allowed)
		}
	}
}

// TestLaunchPaths walks the paths a launch takes through the table and checks the phase and
// the recorded requests after each step.
func TestLaunchPaths(t *testing.T) {
	type step struct {
		ev   event
		want state
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"detached", []step{{evStart, state{phase: phaseStarted}}, {evExec, state{phase: phaseExecd}}, {evExit, state{phase: phaseExited, reaped: true}}, {evFinish, state{phase: phaseFinal, reaped: true}}}},
		{"attached, held", []step{{evStartHeld, state{phase: phaseHeld}}, {evAttach, state{phase: phaseHeld, attached: true, client: true}}, {evRelease, state{phase: phaseStarted, attached: true, client: true}},
			{evExec, state{phase: phaseExecd, attached: true, client: true}}, {evAttach, state{phase: phaseExecd, attached: true, client: true}}, {evExit, state{phase: phaseExited, reaped: true, attached: true, client: true}}, {evFinish, state{phase: phaseFinal, reaped: true, attached: true, client: true}}}},
		{"attached, started for its client", []step{{evAttach, state{phase: phaseWaiting, attached: true, client: true}}, {evStart, state{phase: phaseStarted, attached: true, client: true}}, {evExec, state{phase: phaseExecd, attached: true, client: true}}}},
		{"set-up failure", []step{{evStart, state{phase: phaseStarted}}, {evExit, state{phase: phaseExited, reaped: true}}, {evFinish, state{phase: phaseFinal, reaped: true}}}},
		{"exec read after the reaping", []step{{evStart, state{phase: phaseStarted}}, {evExit, state{phase: phaseExited, reaped: true}}, {evExec, state{phase: phaseExited, reaped: true}}, {evFinish, state{phase: phaseFinal, reaped: true}}}},
		{"held box ends before its client", []step{{evStartHeld, state{phase: phaseHeld}}, {evExit, state{phase: phaseExited, reaped: true}}, {evRelease, state{phase: phaseExited, reaped: true}}, {evFinish, state{phase: phaseFinal, reaped: true}}}},
		{"never started", []step{{evFinish, state{phase: phaseFinal}}}},
		{"stopped before the box", []step{{evStop, state{phase: phaseWaiting, stopAsked: true}}, {evFinish, state{phase: phaseFinal, stopAsked: true}}, {evStop, state{phase: phaseFinal, stopAsked: true}}}},
		{"stopped while starting", []step{{evStop, state{phase: phaseWaiting, stopAsked: true}}, {evStartHeld, state{phase: phaseHeld, stopAsked: true}}, {evExit, state{phase: phaseExited, reaped: true, stopAsked: true}}, {evFinish, state{phase: phaseFinal, reaped: true, stopAsked: true}}}},
		{"client detaches, another attaches", []step{{evStart, state{phase: phaseStarted}}, {evExec, state{phase: phaseExecd}},
			{evAttach, state{phase: phaseExecd, attached: true, client: true}}, {evDetach, state{phase: phaseExecd, attached: true}},
			{evAttach, state{phase: phaseExecd, attached: true, client: true}}, {evExit, state{phase: phaseExited, reaped: true, attached: true, client: true}},
			{evFinish, state{phase: phaseFinal, reaped: true, attached: true, client: true}}, {evDetach, state{phase: phaseFinal, reaped: true, attached: true}}}},
		{"output drained", []step{{evStart, state{phase: phaseStarted}}, {evOutput, state{phase: phaseStarted, outputs: 1}}, {evOutput, state{phase: phaseStarted, outputs: 2}},
			{evExec, state{phase: phaseExecd, outputs: 2}}, {evDrained, state{phase: phaseExecd, outputs: 1}}, {evExit, state{phase: phaseExited, reaped: true, outputs: 1}},
			{evControlClosed, state{phase: phaseExited, reaped: true, outputs: 1, controlClosed: true}}, {evDrained, state{phase: phaseExited, reaped: true, controlClosed: true}},
			{evFinish, state{phase: phaseFinal, reaped: true, controlClosed: true}}}},
		{"stopped while the program runs", []step{{evStart, state{phase: phaseStarted}}, {evExec, state{phase: phaseExecd}}, {evStop, state{phase: phaseExecd, stopAsked: true}},
			{evExit, state{phase: phaseExited, reaped: true, stopAsked: true}}, {evStop, state{phase: phaseExited, reaped: true, stopAsked: true}}, {evFinish, state{phase: phaseFinal, reaped: true, stopAsked: true}}}},
		{"watched to the end", []step{{evWatch, state{phase: phaseWaiting, watchers: 1}}, {evStart, state{phase: phaseStarted, watchers: 1}},
			{evExit, state{phase: phaseExited, reaped: true, watchers: 1}}, {evFinish, state{phase: phaseFinal, reaped: true, watchers: 1}}, {evUnwatch, state{phase: phaseFinal, reaped: true}}}},
		{"top process the pid namespace's init", []step{{evStart, state{phase: phaseStarted}}, {evExec, state{phase: phaseExecd}}, {evInitExit, state{phase: phaseExited, reaped: true, emptied: true}},
			{evFinish, state{phase: phaseFinal, reaped: true, emptied: true}}}},
		{"end reported by the init before its exit", []step{{evStart, state{phase: phaseStarted}}, {evExec, state{phase: phaseExecd}},
			{evEnded, state{phase: phaseExited, emptied: true, ended: true}}, {evControlClosed, state{phase: phaseExited, emptied: true, ended: true, controlClosed: true}},
			{evFinish, state{phase: phaseFinal, emptied: true, ended: true, controlClosed: true}}, {evInitExit, state{phase: phaseFinal, emptied: true, ended: true, reaped: true, controlClosed: true}}}},
		{"end reported, read after the init's reaping", []step{{evStart, state{phase: phaseStarted}}, {evExec, state{phase: phaseExecd}},
			{evInitExit, state{phase: phaseExited, emptied: true, reaped: true}}, {evEnded, state{phase: phaseExited, emptied: true, ended: true, reaped: true}},
			{evFinish, state{phase: phaseFinal, emptied: true, ended: true, reaped: true}}}},
		{"redraws for attached clients", []step{{evStart, state{phase: phaseStarted}}, {evExec, state{phase: phaseExecd}}, {evAttach, state{phase: phaseExecd, attached: true, client: true}},
			{evRedraw, state{phase: phaseExecd, attached: true, client: true, redrawing: true, redraws: 1}}, {evDrawn, state{phase: phaseExecd, attached: true, client: true, redraws: 1}},
			{evRedraw, state{phase: phaseExecd, attached: true, client: true, redrawing: true, redraws: 2}}, {evExit, state{phase: phaseExited, reaped: true, attached: true, client: true, redrawing: true, redraws: 2}},
			{evDrawn, state{phase: phaseExited, reaped: true, attached: true, client: true, redraws: 2}}, {evFinish, state{phase: phaseFinal, reaped: true, attached: true, client: true, redraws: 2}}}},
		{"late client of a failed launch", []step{{evStart, state{phase: phaseStarted}}, {evExit, state{phase: phaseExited, reaped: true}}, {evFinish, state{phase: phaseFinal, reaped: true}}, {evAttach, state{phase: phaseFinal, reaped: true, attached: true, client: true}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := &server{log: log.New(&buf, "", 0)}
			for i, st := range c.steps {
				s.advanceLocked(st.ev)
				if s.st != st.want {
					t.Fatalf("after %v (step %d): %+v, want %+v", st.ev, i, s.st, st.want)
				}
			}
			if buf.Len() != 0 {
				t.Errorf("refused moves logged: %s", buf.String())
			}
		})
	}
	// A refused move is logged and keeps the state.
	var buf bytes.Buffer
	s := &server{log: log.New(&buf, "", 0)}
	s.advanceLocked(evExit)
	if s.st != (state{}) || !strings.Contains(buf.String(), `event "exit" in phase "waiting"`) {
		t.Errorf("exit while waiting: %+v, log %q", s.st, buf.String())
	}
	s.advanceLocked(evStart)
	s.advanceLocked(evDrained)
	if s.st != (state{phase: phaseStarted}) || !strings.Contains(buf.String(), `event "drained" with no output stream open`) {
		t.Errorf("drained with no stream open: %+v, log %q", s.st, buf.String())
	}
	s.advanceLocked(evUnwatch)
	if s.st != (state{phase: phaseStarted}) || !strings.Contains(buf.String(), `event "unwatch" with no watcher`) {
		t.Errorf("unwatch with no watcher: %+v, log %q", s.st, buf.String())
	}
	s.advanceLocked(evExec)
	s.advanceLocked(evRedraw)
	s.advanceLocked(evRedraw)
	if s.st != (state{phase: phaseExecd, redrawing: true, redraws: 1}) || !strings.Contains(buf.String(), `event "redraw" while a redraw waits`) {
		t.Errorf("redraw while one waits: %+v, log %q", s.st, buf.String())
	}
	s.advanceLocked(evDrawn)
	s.advanceLocked(evDrawn)
	if s.st != (state{phase: phaseExecd, redraws: 1}) || !strings.Contains(buf.String(), `event "drawn" with no redraw waiting`) {
		t.Errorf("drawn with no redraw waiting: %+v, log %q", s.st, buf.String())
	}
}

// parked reports, once s's waiter is waiting for the next change again (after it looked at the
// state), true; false if its wait ended instead (what it sent on done is put back).
func parked[T any](s *server, done chan T) bool {
	for {
		s.mu.Lock()
		p := s.changed != nil
		s.mu.Unlock()
		if p {
			return true
		}
		select {
		case r := <-done:
			done <- r
			return false
		default:
		}
		runtime.Gosched()
	}
}

// TestAwait: a wait for a state ends at the event that makes it hold, not at others; a wait
// whose state holds already returns at once; the expiry ends a wait with the state then.
func TestAwait(t *testing.T) {
	s := &server{log: log.New(io.Discard, "", 0)}
	attached := func(st state) bool { return st.attached }
	type result struct {
		st state
		ok bool
	}
	done := make(chan result, 1)
	go func() {
		st, ok := s.await(attached, nil)
		done <- result{st, ok}
	}()
	parked := func() bool { return parked(s, done) }
	if !parked() {
		t.Fatalf("await ended before any event: %+v", <-done)
	}
	// Events that do not make the state hold leave the waiter waiting.
	for _, ev := range []event{evStartHeld, evRelease} {
		s.advance(ev)
		if !parked() {
			t.Fatalf("await ended at %v: %+v", ev, <-done)
		}
	}
	s.advance(evAttach)
	if r := <-done; !r.ok || r.st != (state{phase: phaseStarted, attached: true, client: true}) {
		t.Errorf("await = %+v, %v; want started and attached", r.st, r.ok)
	}
	if st, ok := s.await(attached, nil); !ok || !st.attached {
		t.Errorf("await of a state that holds = %+v, %v", st, ok)
	}
	expired := make(chan struct{})
	close(expired)
	if st, ok := s.await(func(st state) bool { return st.phase >= phaseExited }, expired); ok || st.phase != phaseStarted {
		t.Errorf("expired await = %+v, %v; want started, not done", st, ok)
	}
}

// TestDrained: the box counts as drained (supervise settles it) only once its control channel
// and every output stream have ended, in whichever order they end.
func TestDrained(t *testing.T) {
	for _, order := range [][]event{
		{evControlClosed, evDrained, evDrained},
		{evDrained, evControlClosed, evDrained},
		{evDrained, evDrained, evControlClosed},
	} {
		s := &server{log: log.New(io.Discard, "", 0)}
		for _, ev := range []event{evStart, evOutput, evOutput, evExit} {
			s.advanceLocked(ev)
		}
		for i, ev := range order {
			if s.st.drained() {
				t.Fatalf("%v: drained before %v (step %d): %+v", order, ev, i, s.st)
			}
			s.advanceLocked(ev)
		}
		if !s.st.drained() {
			t.Errorf("%v: not drained after all: %+v", order, s.st)
		}
	}
}

// TestDaemonGone: when the last watcher's connection ends before the launch's end, the shim
// logs that the daemon is gone and the launch runs on (the phase stays); a watcher that comes
// back is counted again; the watchers' ends after the final status are not a daemon gone.
func TestDaemonGone(t *testing.T) {
	var buf bytes.Buffer
	s := &server{log: log.New(&buf, "", 0)}
	for _, ev := range []event{evWatch, evStart, evExec, evWatch, evUnwatch} {
		s.advanceLocked(ev)
	}
	if buf.Len() != 0 {
		t.Fatalf("logged with a watcher left: %q", buf.String())
	}
	s.advanceLocked(evUnwatch)
	if s.st != (state{phase: phaseExecd}) || !strings.Contains(buf.String(), "no watcher left (the daemon is gone)") {
		t.Fatalf("last watcher gone: %+v, log %q", s.st, buf.String())
	}
	buf.Reset()
	for _, ev := range []event{evWatch, evExit, evFinish, evUnwatch} {
		s.advanceLocked(ev)
	}
	if s.st != (state{phase: phaseFinal, reaped: true}) || buf.Len() != 0 {
		t.Errorf("watcher gone after the end: %+v, log %q", s.st, buf.String())
	}
}

// TestAwaitLocked: a pipe-mode pump's wait for a client (deliver) ends at the client's attach
// or at the box's exit, not at other events, and returns holding the lock with the client
// still attached; a detach before it looked again keeps it waiting.
func TestAwaitLocked(t *testing.T) {
	for _, end := range []event{evAttach, evExit} {
		t.Run(end.String(), func(t *testing.T) {
			s := &server{log: log.New(io.Discard, "", 0)}
			s.advance(evStart)
			done := make(chan state, 1)
			go func() {
				s.mu.Lock()
				s.awaitLocked(func(st state) bool { return st.client || st.phase >= phaseExited })
				st := s.st
				s.mu.Unlock()
				done <- st
			}()
			parked := func() bool { return parked(s, done) }
			if !parked() {
				t.Fatalf("the wait ended before any event: %+v", <-done)
			}
			for _, ev := range []event{evOutput, evExec, evWatch, evStop} {
				s.advance(ev)
				if !parked() {
					t.Fatalf("the wait ended at %v: %+v", ev, <-done)
				}
			}
			// An attach and a detach in one critical section: the waiter sees neither.
			s.mu.Lock()
			s.advanceLocked(evAttach)
			s.advanceLocked(evDetach)
			s.mu.Unlock()
			if !parked() {
				t.Fatalf("the wait ended with no client attached: %+v", <-done)
			}
			s.advance(end)
			st := <-done
			if end == evAttach && !st.client || end == evExit && st.phase != phaseExited {
				t.Errorf("the wait ended at %v with %+v", end, st)
			}
		})
	}
}

// ptyServer returns a shim's server in tty mode whose program has been exec'd, with a real PTY
// of size (the slave is returned, for the program's side) and its output while no client is
// attached discarded; logged is what the server logs.
func ptyServer(t *testing.T, size console.WindowSize) (s *server, sl *os.File, logged *bytes.Buffer) {
	t.Helper()
	m, sl, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		sl.Close()
	})
	logOut, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logOut.Close() })
	logged = &bytes.Buffer{}
	s = &server{log: log.New(logged, "", 0), tty: true, master: m, logOut: logOut, size: size}
	setSize(m, s.size)
	s.advance(evStart)
	s.advance(evExec)
	return s, sl, logged
}

// TestRedrawEndsAtOutput: a redraw for a newly attached client moves the PTY one row shorter
// and waits for the program to draw (redraw); the PTY's pump's next output ends that wait
// (deliver: drawn), and once the output paused the redraw gives the size back and waits for the
// program to draw again, which its next output ends. Output while no redraw waits is no drawn
// event.
func TestRedrawEndsAtOutput(t *testing.T) {
	s, sl, buf := ptyServer(t, console.WindowSize{Rows: 24, Cols: 80})
	rows := func() int {
		r, _, err := pty.Getsize(sl)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	done := make(chan struct{})
	go func() {
		s.redraw()
		close(done)
	}()
	s.await(func(st state) bool { return st.redrawing }, nil)
	if r := rows(); r != 23 {
		t.Errorf("while the redraw waits: %d rows, want 23", r)
	}
	s.deliver(console.FrameStdout, []byte("drawn"), &pumpState{})
	s.mu.Lock()
	st := s.st
	s.mu.Unlock()
	if st.redrawing || st.redraws != 1 {
		t.Fatalf("after the program's output: %+v, want the redraw's wait over", st)
	}
	// The redraw gives the size back once the output paused, and waits for the program to draw.
	expired, release := expiry(10 * time.Second)
	defer release()
	for rows() != 24 {
		select {
		case <-expired:
			t.Fatalf("the size was not given back: %d rows", rows())
		case <-time.After(time.Millisecond):
		}
	}
	s.await(func(st state) bool { return st.redrawing && st.redraws == 2 }, nil)
	s.deliver(console.FrameStdout, []byte("more"), &pumpState{})
	<-done // the program drew at the size given back: the redraw is over
	s.deliver(console.FrameStdout, []byte("later"), &pumpState{})
	s.mu.Lock()
	st = s.st
	s.mu.Unlock()
	if st.redrawing || st.redraws != 2 {
		t.Errorf("after the redraw: %+v, want its two waits over", st)
	}
	s.advance(evExit)
	s.advance(evFinish)
	if buf.Len() != 0 {
		t.Errorf("refused moves logged: %s", buf.String())
	}
}

// sizeReader starts a program (SizeReaderMain) on the PTY whose slave is sl, its controlling terminal (as a
// box's program has it: the kernel signals it when the size changes), that at each SIGWINCH
// reads its terminal's size and appends it to a file, as a full-screen program reads the size
// it draws for, and when draw is set then writes a line to the terminal (it draws, at every
// signal, as less does); and sets it as s's box (its program exec'd). sizes returns the sizes
// it read so far, one "rowsxcols" each; waitSizes waits (bounded) until it read n of them;
// handled returns the sizes it read once it has handled every signal sent to it before.
func sizeReader(t *testing.T, s *server, sl *os.File, draw bool) (sizes func() []string, waitSizes func(n int) []string, handled func() []string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "sizes")
	args := []string{"size-reader", file}
	if draw {
		args = append(args, "draw")
	}
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Stdin, cmd.Stdout = sl, sl
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	sizes = func() []string {
		b, err := os.ReadFile(file)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", "x"))
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		expired, release := expiry(10 * time.Second)
		defer release()
		for !ok() {
			select {
			case <-expired:
				t.Fatalf("%s: the program read the sizes %q", what, sizes())
			case <-time.After(time.Millisecond):
			}
		}
	}
	until("the program did not set its trap", func() bool { _, err := os.Stat(file + ".ready"); return err == nil })
	waitSizes = func(n int) []string {
		t.Helper()
		until(fmt.Sprintf("want %d sizes", n), func() bool { return len(sizes()) >= n })
		return sizes()
	}
	handled = func() []string {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGPWR); err != nil {
			t.Fatal(err)
		}
		until("the program did not mark the signals handled", func() bool { return slices.Contains(sizes(), "mark") })
		got := sizes()
		return got[:slices.Index(got, "mark")]
	}
	s.mu.Lock()
	s.box = &engine.Box{Process: cmd.Process, PidFD: -1}
	s.status.Execd = true
	s.mu.Unlock()
	return sizes, waitSizes, handled
}

// TestRedrawEndsAtWait: a program that does not draw (nothing reaches the PTY's pump) does not
// keep the redraw waiting: the redraw ends its own wait for a drawing at the moved size after
// redrawWait (drawn), gives the size back (the kernel's SIGWINCH: the program reads it), ends
// its wait for a drawing at that size after redrawWait too, and then signals the program once
// more (it may have missed the signal of the size given back).
func TestRedrawEndsAtWait(t *testing.T) {
	s, sl, buf := ptyServer(t, console.WindowSize{Rows: 24, Cols: 80})
	_, waitSizes, _ := sizeReader(t, s, sl, false)
	done := make(chan struct{})
	go func() {
		s.redraw()
		close(done)
	}()
	s.await(func(st state) bool { return st.redrawing }, nil)
	if got := waitSizes(1); got[0] != "23x80" {
		t.Errorf("the program read %q at the redraw's first signal, want 23x80", got)
	}
	// No output: the redraw's own waits end it.
	<-done
	s.mu.Lock()
	st := s.st
	s.mu.Unlock()
	if st.redrawing || st.redraws != 2 {
		t.Errorf("after the waits: %+v, want two redraw waits over", st)
	}
	if got := waitSizes(3); !slices.Equal(got, []string{"23x80", "24x80", "24x80"}) {
		t.Errorf("the program read %q, want 23x80 (the move), 24x80 (the size given back), 24x80 (the signal once more)", got)
	}
	s.advance(evExit)
	s.advance(evFinish)
	if r, c, _ := pty.Getsize(sl); r != 24 || c != 80 {
		t.Errorf("after the redraw: %dx%d, want 24x80", r, c)
	}
	if buf.Len() != 0 {
		t.Errorf("refused moves logged: %s", buf.String())
	}
}

// waitForDrawing makes every redraw of the test wait a minute for its program's drawing: a
// test whose program draws is then as quick as its program, and does not fail when a loaded
// machine runs the program later than redrawWait.
func waitForDrawing(t *testing.T) {
	old := redrawWait
	redrawWait = time.Minute
	t.Cleanup(func() { redrawWait = old })
}

// TestRedrawSignalsOncePerMove: a program that draws at every SIGWINCH (as less does) is
// signalled once for each move of the size of a redraw, by the kernel, and no more once it has
// drawn at the size given back. less loses a key that reaches its terminal within its wake-up
// from a SIGWINCH (its handler jumps out of the read(2) that returned the key): the shim's own
// signal after each move, and one more 500 ms after the size came back, reached less after it
// had drawn at the full size, and the key typed then was lost (e2e
// TestDetachAttach/FullScreenRedrawn: the "q" did not quit less).
func TestRedrawSignalsOncePerMove(t *testing.T) {
	waitForDrawing(t)
	s, sl, buf := ptyServer(t, console.WindowSize{Rows: 24, Cols: 80})
	_, _, handled := sizeReader(t, s, sl, true)
	s.advance(evOutput)
	go s.pump(s.master, console.FrameStdout)
	// redraw returns once it has sent every signal it sends.
	s.redraw()
	if got := handled(); !slices.Equal(got, []string{"23x80", "24x80"}) {
		t.Errorf("the program read %q, want 23x80 then 24x80: one SIGWINCH per move, none after it drew", got)
	}
	s.mu.Lock()
	st := s.st
	s.mu.Unlock()
	if st.redrawing || st.redraws != 2 {
		t.Errorf("after the redraw: %+v, want its two waits over, each ended by the program's drawing", st)
	}
	s.advance(evExit)
	s.advance(evFinish)
	if buf.Len() != 0 {
		t.Errorf("refused moves logged: %s", buf.String())
	}
}

// TestRedrawOnlySignals: a redraw that cannot move the size — another redraw waits, the
// terminal has a single row, or there is no PTY master (yet) — moves nothing and starts no
// wait: it only signals the program, which reads the size as it is.
func TestRedrawOnlySignals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     console.WindowSize
		noMaster bool
		waiting  bool // another redraw waits
		want     string
	}{
		{name: "another waits", size: console.WindowSize{Rows: 24, Cols: 80}, waiting: true, want: "23x80"},
		{name: "one row", size: console.WindowSize{Rows: 1, Cols: 80}, want: "1x80"},
		{name: "no master", size: console.WindowSize{Rows: 24, Cols: 80}, noMaster: true, want: "24x80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sl, buf := ptyServer(t, tc.size)
			if tc.noMaster {
				s.master = nil
			}
			_, waitSizes, _ := sizeReader(t, s, sl, false)
			first := make(chan struct{})
			if tc.waiting {
				// The first waits until this test delivers the program's drawing.
				waitForDrawing(t)
				go func() {
					s.redraw()
					close(first)
				}()
				// The program reads the moved size at the first's move, the under test's
				// signal, or both at once.
				s.await(func(st state) bool { return st.redrawing }, nil)
			}
			s.mu.Lock()
			before := s.st
			s.mu.Unlock()
			s.redraw() // returns once it has signalled: it waits for nothing
			s.mu.Lock()
			after := s.st
			s.mu.Unlock()
			if after != before {
				t.Errorf("the redraw moved the state: %+v, was %+v", after, before)
			}
			if got := waitSizes(1); got[0] != tc.want {
				t.Errorf("the program read %q after the redraw, want %s first", got, tc.want)
			}
			if tc.waiting {
				s.deliver(console.FrameStdout, []byte("drawn"), &pumpState{})
			}
			s.advance(evExit)
			s.advance(evFinish)
			if tc.waiting {
				<-first
			}
			if buf.Len() != 0 {
				t.Errorf("refused moves logged: %s", buf.String())
			}
		})
	}
}
