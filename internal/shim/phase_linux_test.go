package shim

import (
	"bytes"
	"log"
	"strings"
	"testing"
)

// TestTransitions pins the shim's transition table: every (phase, event) pair, the phase it
// leads to, or that it is refused.
func TestTransitions(t *testing.T) {
	const refused = phase(-1)
	want := map[phase][6]phase{
		//                 start         start held  release       exec          exit          finish
		phaseWaiting: {phaseStarted, phaseHeld, refused, refused, refused, phaseFinal},
		phaseHeld:    {refused, refused, phaseStarted, phaseExecd, phaseExited, refused},
		phaseStarted: {refused, refused, phaseStarted, phaseExecd, phaseExited, refused},
		phaseExecd:   {refused, refused, phaseExecd, phaseExecd, phaseExited, refused},
		phaseExited:  {refused, refused, phaseExited, phaseExited, refused, phaseFinal},
		phaseFinal:   {refused, refused, phaseFinal, phaseFinal, phaseFinal, phaseFinal},
	}
	events := []event{evStart, evStartHeld, evRelease, evExec, evExit, evFinish}
	for from := phaseWaiting; from <= phaseFinal; from++ {
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
}

// TestLaunchPaths walks the paths a launch takes through the table and checks the phase after
// each step.
func TestLaunchPaths(t *testing.T) {
	for _, c := range []struct {
		name   string
		events []event
		want   []phase
	}{
		{"detached", []event{evStart, evExec, evExit, evFinish}, []phase{phaseStarted, phaseExecd, phaseExited, phaseFinal}},
		{"attached, held", []event{evStartHeld, evRelease, evExec, evExit, evFinish}, []phase{phaseHeld, phaseStarted, phaseExecd, phaseExited, phaseFinal}},
		{"set-up failure", []event{evStart, evExit, evFinish}, []phase{phaseStarted, phaseExited, phaseFinal}},
		{"exec read after the reaping", []event{evStart, evExit, evExec, evFinish}, []phase{phaseStarted, phaseExited, phaseExited, phaseFinal}},
		{"held box ends before its client", []event{evStartHeld, evExit, evRelease, evFinish}, []phase{phaseHeld, phaseExited, phaseExited, phaseFinal}},
		{"never started", []event{evFinish}, []phase{phaseFinal}},
		{"stopped while starting", []event{evStartHeld, evExit, evFinish}, []phase{phaseHeld, phaseExited, phaseFinal}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := &server{log: log.New(&buf, "", 0)}
			for i, ev := range c.events {
				s.advanceLocked(ev)
				if s.phase != c.want[i] {
					t.Fatalf("after %v (step %d): phase %v, want %v", ev, i, s.phase, c.want[i])
				}
			}
			if buf.Len() != 0 {
				t.Errorf("refused moves logged: %s", buf.String())
			}
		})
	}
	// A refused move is logged and keeps the phase.
	var buf bytes.Buffer
	s := &server{log: log.New(&buf, "", 0)}
	s.advanceLocked(evExit)
	if s.phase != phaseWaiting || !strings.Contains(buf.String(), `event "exit" in phase "waiting"`) {
		t.Errorf("exit while waiting: phase %v, log %q", s.phase, buf.String())
	}
}
