package profile

import (
	"errors"
	"fmt"
)

// Error classes of the package, checked with errors.Is.
var (
	// ErrArgumentDenied means an argument the profile refuses was given. errors.As with
	// *ArgumentError gives the argument.
	ErrArgumentDenied = errors.New("argument denied")
	// ErrPrecondition means something a profile requires does not hold (a model, a configured
	// gateway provider, egress deny, the relay). errors.As with *PreconditionError gives the
	// configuration key that fixes it.
	ErrPrecondition = errors.New("profile precondition failed")
)

// ArgumentError is a refused argument. It matches ErrArgumentDenied.
type ArgumentError struct {
	Profile string
	// Arg is the argument as given ("--port=8080").
	Arg string
	// Rule is the denied-args rule it matched ("--port").
	Rule   string
	Reason string
}

func (e *ArgumentError) Error() string {
	s := fmt.Sprintf("%s: argument %q is refused in a box", e.Profile, e.Arg)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is reports whether target is ErrArgumentDenied.
func (e *ArgumentError) Is(target error) bool { return target == ErrArgumentDenied }

// PreconditionError is a precondition that does not hold. It matches ErrPrecondition.
type PreconditionError struct {
	Profile string
	// What names the precondition: "egress", "model", "gateway", "relay".
	What string
	Msg  string
	// Key is the configuration key that fixes it ("models.copilot", "gateway.gemini",
	// "egress"); "" when none does.
	Key string
	// Fix says what to do.
	Fix string
}

func (e *PreconditionError) Error() string {
	return fmt.Sprintf("%s: %s", e.Profile, e.Msg)
}

// Is reports whether target is ErrPrecondition.
func (e *PreconditionError) Is(target error) bool { return target == ErrPrecondition }
