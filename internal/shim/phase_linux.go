package shim

import (
	"fmt"
	"time"
)

// phase is where a shim's launch is in its life (transitions). It only moves forward:
//
//	waiting ──start──────────────────▶ started ──exec──▶ exec'd ──exit──▶ exited ──finish──▶ final
//	waiting ──start held──▶ held ──release──▶ started
//	held, started ──exit──▶ exited   (the box ended before its program ran, or was stopped)
//	init exit: as exit, for a box whose top process is its pid namespace's init
//	exec'd ──ended──▶ exited   (the init reported the box's end before its own exit: EventEnded)
//	exited ──exit, init exit──▶ exited   (the init reaped after the end it reported)
//	waiting ──finish──▶ final        (the box never started)
//
// Events that come late keep the phase: a report of the exec read after the box was reaped, a
// release of a box that has ended, the reaping of a box whose launch was already finished.
//
// The other events keep the phase and are recorded beside it (state); they are what the
// shim's goroutines wait for (await), in place of a channel or a flag each:
//   - attach, detach: a console client attached (the first lets the box start, or its held
//     program go, and ends a failed launch's wait for a late client), or the attached one
//     detached or was lost;
//   - stop: a stop was requested (while there is no box: the box is not started, or is
//     stopped as soon as it is; in final: too late, nothing to do);
//   - control closed: the box's control channel reached its end;
//   - output, drained: one of the box's output streams is being read, or was read to its end
//     (supervise settles the box once the control channel and every stream are done);
//   - watch, unwatch: a watcher (the daemon) connected, or its connection ended (with none
//     left before the end, the daemon is gone: the launch runs on, and the daemon that comes
//     back watches it again);
//   - redraw, drawn: a redraw for a newly attached client moved the PTY's size and waits for
//     the program to draw, or its wait is over: the program's next output (the PTY's pump),
//     or redrawWait.
type phase int

const (
	phaseWaiting phase = iota // no box yet
	phaseHeld                 // the box is built; its program waits for release (engine.IO.Hold)
	phaseStarted              // the box runs; its program is not exec'd yet
	phaseExecd                // the program runs
	phaseExited               // the box's top process has been reaped
	phaseFinal                // the final status is computed and sent
)

func (p phase) String() string {
	switch p {
	case phaseWaiting:
		return "waiting"
	case phaseHeld:
		return "held"
	case phaseStarted:
		return "started"
	case phaseExecd:
		return "exec'd"
	case phaseExited:
		return "exited"
	case phaseFinal:
		return "final"
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// event is what moves a launch from one phase to the next, or changes what is recorded beside
// its phase.
type event int

const (
	evStart         event = iota // the box has been started and starts its program at once
	evStartHeld                  // the box has been started and holds its program
	evRelease                    // the held program may start (its client attached)
	evExec                       // the box reported the program's exec
	evExit                       // the box's top process has been reaped
	evInitExit                   // the box's top process, its pid namespace's init, has been reaped: the kernel has emptied the namespace
	evEnded                      // the box's init, its pid namespace's init, reported the box's end before its own exit (engine.EventEnded): nothing else is left in the namespace
	evFinish                     // the final status has been computed
	evAttach                     // a client attached (the first, or a later one)
	evStop                       // a stop was requested
	evDetach                     // the attached client detached or was lost
	evControlClosed              // the box's control channel reached its end
	evOutput                     // an output stream of the box is being read
	evDrained                    // an output stream of the box was read to its end
	evWatch                      // a watcher (the daemon) connected
	evUnwatch                    // a watcher's connection ended
	evRedraw                     // a redraw moved the PTY's size and waits for the program to draw
	evDrawn                      // the waiting redraw is over: the program drew, or the wait expired
)

func (e event) String() string {
	switch e {
	case evStart:
		return "start"
	case evStartHeld:
		return "start held"
	case evRelease:
		return "release"
	case evExec:
		return "exec"
	case evExit:
		return "exit"
	case evInitExit:
		return "init exit"
	case evEnded:
		return "ended"
	case evFinish:
		return "finish"
	case evAttach:
		return "attach"
	case evStop:
		return "stop"
	case evDetach:
		return "detach"
	case evControlClosed:
		return "control closed"
	case evOutput:
		return "output"
	case evDrained:
		return "drained"
	case evWatch:
		return "watch"
	case evUnwatch:
		return "unwatch"
	case evRedraw:
		return "redraw"
	case evDrawn:
		return "drawn"
	}
	return fmt.Sprintf("event(%d)", int(e))
}

// transitions is the shim's transition table: the phase each event leads to from each phase.
// A pair that is not in it cannot happen (the box is started once, and only reaped once it
// has been started; its control channel and output exist only once it has been; a redraw
// is for a program that has been exec'd); next refuses it.
var transitions = map[phase]map[event]phase{
	phaseWaiting: {evStart: phaseStarted, evStartHeld: phaseHeld, evFinish: phaseFinal, evAttach: phaseWaiting, evStop: phaseWaiting,
		evDetach: phaseWaiting, evWatch: phaseWaiting, evUnwatch: phaseWaiting},
	// A started box (held or not) is finished only once it has been reaped and settled.
	phaseHeld: {evRelease: phaseStarted, evExec: phaseExecd, evExit: phaseExited, evInitExit: phaseExited, evAttach: phaseHeld, evStop: phaseHeld,
		evDetach: phaseHeld, evControlClosed: phaseHeld, evOutput: phaseHeld, evDrained: phaseHeld, evWatch: phaseHeld, evUnwatch: phaseHeld},
	phaseStarted: {evRelease: phaseStarted, evExec: phaseExecd, evExit: phaseExited, evInitExit: phaseExited, evAttach: phaseStarted, evStop: phaseStarted,
		evDetach: phaseStarted, evControlClosed: phaseStarted, evOutput: phaseStarted, evDrained: phaseStarted, evWatch: phaseStarted, evUnwatch: phaseStarted},
	phaseExecd: {evRelease: phaseExecd, evExec: phaseExecd, evExit: phaseExited, evInitExit: phaseExited, evEnded: phaseExited, evAttach: phaseExecd, evStop: phaseExecd,
		evDetach: phaseExecd, evControlClosed: phaseExecd, evOutput: phaseExecd, evDrained: phaseExecd, evWatch: phaseExecd, evUnwatch: phaseExecd,
		evRedraw: phaseExecd, evDrawn: phaseExecd},
	// The control channel and the output end after the reaping, or past drainTimeout after
	// the finish (a PTY's descriptor reported late). A redraw an attach asked for before
	// the reaping may begin after it, and runs its course. An end the init reported comes
	// before its reaping, or after it (two goroutines read them).
	phaseExited: {evRelease: phaseExited, evExec: phaseExited, evExit: phaseExited, evInitExit: phaseExited, evEnded: phaseExited, evFinish: phaseFinal, evAttach: phaseExited, evStop: phaseExited,
		evDetach: phaseExited, evControlClosed: phaseExited, evOutput: phaseExited, evDrained: phaseExited, evWatch: phaseExited, evUnwatch: phaseExited,
		evRedraw: phaseExited, evDrawn: phaseExited},
	phaseFinal: {evRelease: phaseFinal, evExec: phaseFinal, evExit: phaseFinal, evInitExit: phaseFinal, evEnded: phaseFinal, evFinish: phaseFinal, evAttach: phaseFinal, evStop: phaseFinal,
		evDetach: phaseFinal, evControlClosed: phaseFinal, evDrained: phaseFinal, evWatch: phaseFinal, evUnwatch: phaseFinal,
		evRedraw: phaseFinal, evDrawn: phaseFinal},
}

// next returns the phase ev leads to from p, or an error when the table has no such move.
func next(p phase, ev event) (phase, error) {
	to, ok := transitions[p][ev]
	if !ok {
		return p, fmt.Errorf("shim: event %q in phase %q", ev, p)
	}
	return to, nil
}

// state is a launch's phase and what the events recorded beside it.
type state struct {
	phase phase
	// attached: a client has attached (evAttach), so the launch may start its box or release
	// its held program, and a launch that failed before its client came has been seen.
	attached bool
	// client: a console client is attached now (evAttach; evDetach).
	client bool
	// stopAsked: a stop was requested (evStop). Before the box it means that the box is not
	// started, or is stopped as soon as it is.
	stopAsked bool
	// controlClosed: the box's control channel reached its end (evControlClosed).
	controlClosed bool
	// outputs is the number of the box's output streams still being read (evOutput,
	// evDrained): 0 once the box's output is drained.
	outputs int
	// watchers is the number of watchers connected (evWatch, evUnwatch).
	watchers int
	// emptied: the box's top process, the init (pid 1) of its pid namespace, was reaped
	// (evInitExit), so the kernel has emptied the namespace, or reported the box's end
	// (evEnded), having seen every other process of it gone: settle need not scan.
	emptied bool
	// ended: the init reported the box's end before its exit (evEnded); reaped: the box's
	// top process has been reaped (evExit, evInitExit), which the shim waits for before it
	// exits.
	ended, reaped bool
	// redrawing: a redraw waits for the program to draw (evRedraw; evDrawn), the
	// redraws-th since the launch began (so that a redraw tells its own wait from a later one).
	redrawing bool
	redraws   int
}

// next returns the state ev leads to from st, or an error when the table has no such move.
func (st state) next(ev event) (state, error) {
	to, err := next(st.phase, ev)
	if err != nil {
		return st, err
	}
	switch ev {
	case evExit:
		st.reaped = true
	case evInitExit:
		st.emptied, st.reaped = true, true
	case evEnded:
		st.emptied, st.ended = true, true
	case evRedraw:
		if st.redrawing {
			return st, fmt.Errorf("shim: event %q while a redraw waits", ev)
		}
		st.redrawing = true
		st.redraws++
	case evDrawn:
		if !st.redrawing {
			return st, fmt.Errorf("shim: event %q with no redraw waiting", ev)
		}
		st.redrawing = false
	case evAttach:
		st.attached, st.client = true, true
	case evDetach:
		st.client = false
	case evStop:
		st.stopAsked = true
	case evControlClosed:
		st.controlClosed = true
	case evOutput:
		st.outputs++
	case evDrained:
		if err := decrement(&st.outputs, ev, "output stream open"); err != nil {
			return st, err
		}
	case evWatch:
		st.watchers++
	case evUnwatch:
		if err := decrement(&st.watchers, ev, "watcher"); err != nil {
			return st, err
		}
	}
	st.phase = to
	return st, nil
}

// decrement counts one of what n counts (what) away for ev, or refuses when there is none.
func decrement(n *int, ev event, what string) error {
	if *n == 0 {
		return fmt.Errorf("shim: event %q with no %s", ev, what)
	}
	*n--
	return nil
}

// drained reports whether the box's control channel and every output stream reached their end.
func (st state) drained() bool { return st.controlClosed && st.outputs == 0 }

// advanceLocked moves the launch on by ev (s.mu held) and wakes those waiting for a change
// (await). A move the table refuses is a bug: it is logged and the state stays.
func (s *server) advanceLocked(ev event) {
	to, err := s.st.next(ev)
	if err != nil {
		s.log.Print(err)
		return
	}
	if ev == evUnwatch && to.watchers == 0 && to.phase < phaseFinal {
		s.log.Printf("no watcher left (the daemon is gone): the launch runs on")
	}
	s.st = to
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// advance is advanceLocked for a caller that does not hold s.mu.
func (s *server) advance(ev event) {
	s.mu.Lock()
	s.advanceLocked(ev)
	s.mu.Unlock()
}

// nextChangeLocked returns a channel closed at the launch's next event (s.mu held).
func (s *server) nextChangeLocked() <-chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// until returns the launch's state and whether done holds for it; when it does not, changed
// is closed at the next event: for a caller that waits in a select of its own, and looks
// again when changed closes.
func (s *server) until(done func(state) bool) (st state, changed <-chan struct{}, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if done(s.st) {
		return s.st, nil, true
	}
	return s.st, s.nextChangeLocked(), false
}

// await waits until done holds for the launch's state, or until expired is closed (nil:
// never), and returns the state then and whether done holds for it.
func (s *server) await(done func(state) bool, expired <-chan struct{}) (state, bool) {
	for {
		st, changed, ok := s.until(done)
		if ok {
			return st, true
		}
		select {
		case <-changed:
		case <-expired:
			st, _, ok := s.until(done)
			return st, ok
		}
	}
}

// expiry returns a channel closed after d, and the function that releases its timer.
func expiry(d time.Duration) (<-chan struct{}, func() bool) {
	ch := make(chan struct{})
	t := time.AfterFunc(d, func() { close(ch) })
	return ch, t.Stop
}

// awaitLocked waits, s.mu held, until done holds for the launch's state, and returns with
// s.mu held: what the caller reads then is consistent with the state done saw.
func (s *server) awaitLocked(done func(state) bool) {
	for !done(s.st) {
		changed := s.nextChangeLocked()
		s.mu.Unlock()
		<-changed
		s.mu.Lock()
	}
}
