package engine

import (
	"errors"
	"os"
	"testing"

	"github.com/agentbox/agentbox/internal/plan"
)

// TestIOCheck: a pipe console is refused without each of its three streams, with an error of
// the box set-up class; a tty console needs none of them.
func TestIOCheck(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name    string
		console plan.Console
		io      IO
		ok      bool
	}{
		{"pipe with every stream", plan.ConsolePipe, IO{Stdin: f, Stdout: f, Stderr: f}, true},
		{"pipe without stdin", plan.ConsolePipe, IO{Stdout: f, Stderr: f}, false},
		{"pipe without stdout", plan.ConsolePipe, IO{Stdin: f, Stderr: f}, false},
		{"pipe without stderr", plan.ConsolePipe, IO{Stdin: f, Stdout: f}, false},
		{"tty without streams", plan.ConsoleTTY, IO{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.io.Check(c.console)
			if c.ok && err != nil {
				t.Errorf("Check = %v, want nil", err)
			}
			if !c.ok && !errors.Is(err, ErrBoxSetup) {
				t.Errorf("Check = %v, want an error wrapping ErrBoxSetup", err)
			}
		})
	}
}
