package shim

import "fmt"

// phase is where a shim's launch is in its life (transitions). It only moves forward:
//
//	waiting ──start──────────────────▶ started ──exec──▶ exec'd ──exit──▶ exited ──finish──▶ final
//	waiting ──start held──▶ held ──release──▶ started
//	held, started ──exit──▶ exited   (the box ended before its program ran, or was stopped)
//	waiting ──finish──▶ final        (the box never started)
//
// Events that come late keep the phase: a report of the exec read after the box was reaped, a
// release of a box that has ended, the reaping of a box whose launch was already finished.
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

// event is what moves a launch from one phase to the next.
type event int

const (
	evStart     event = iota // the box has been started and starts its program at once
	evStartHeld              // the box has been started and holds its program
	evRelease                // the held program may start (its client attached)
	evExec                   // the box reported the program's exec
	evExit                   // the box's top process has been reaped
	evFinish                 // the final status has been computed
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
	case evFinish:
		return "finish"
	}
	return fmt.Sprintf("event(%d)", int(e))
}

// transitions is the shim's transition table: the phase each event leads to from each phase.
// A pair that is not in it cannot happen (the box is started once, and only reaped once it
// has been started); next refuses it.
var transitions = map[phase]map[event]phase{
	phaseWaiting: {evStart: phaseStarted, evStartHeld: phaseHeld, evFinish: phaseFinal},
	// A started box (held or not) is finished only once it has been reaped and settled.
	phaseHeld:    {evRelease: phaseStarted, evExec: phaseExecd, evExit: phaseExited},
	phaseStarted: {evRelease: phaseStarted, evExec: phaseExecd, evExit: phaseExited},
	phaseExecd:   {evRelease: phaseExecd, evExec: phaseExecd, evExit: phaseExited},
	phaseExited:  {evRelease: phaseExited, evExec: phaseExited, evFinish: phaseFinal},
	phaseFinal:   {evRelease: phaseFinal, evExec: phaseFinal, evExit: phaseFinal, evFinish: phaseFinal},
}

// next returns the phase ev leads to from p, or an error when the table has no such move.
func next(p phase, ev event) (phase, error) {
	to, ok := transitions[p][ev]
	if !ok {
		return p, fmt.Errorf("shim: event %q in phase %q", ev, p)
	}
	return to, nil
}

// advanceLocked moves the launch on by ev (s.mu held). A move the table refuses is a bug: it is
// logged and the phase stays.
func (s *server) advanceLocked(ev event) {
	to, err := next(s.phase, ev)
	if err != nil {
		s.log.Print(err)
		return
	}
	s.phase = to
}
