package console

import (
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/internal/engine"
)

// Error classes of the attach client.
var (
	// ErrNotSupported is returned off Linux.
	ErrNotSupported = errors.New("console attach not supported on this platform")
	// ErrNotOwner: the shim socket or its directory does not belong to the caller (or the
	// directory is writable by others), so it is not trusted.
	ErrNotOwner = errors.New("shim socket not owned by the caller")
	// ErrShimGone: nothing listens on the shim socket; the launch has ended (read its status).
	ErrShimGone = errors.New("box shim is gone")
	// ErrConnectionLost: the connection ended without an exit frame.
	ErrConnectionLost = errors.New("connection to box shim lost")
	// ErrDetached: the client detached with the detach keys; the program keeps running.
	ErrDetached = errors.New("console detached")
	// ErrTakenOver: another client attached and took the console over; the program keeps
	// running.
	ErrTakenOver = errors.New("console taken over by another client")
)

// StartError is a start-up failure of the box: the program never ran, so there is no exit code.
// It unwraps to the engine's error class for Code (engine.ErrorForCode), so
// errors.Is(err, engine.ErrProgramNotFound) works.
type StartError struct {
	Code    string
	Message string
}

func (e *StartError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("box start-up failed [%s]", e.Code)
	}
	return fmt.Sprintf("%s [%s]", e.Message, e.Code)
}

// Unwrap returns the engine error class for Code.
func (e *StartError) Unwrap() error { return engine.ErrorForCode(e.Code) }

// Result turns an exit frame into Attach's results: the program's exit code, or a *StartError.
func (x Exit) Result() (int, error) {
	if x.ErrorCode != "" {
		return -1, &StartError{Code: x.ErrorCode, Message: x.Message}
	}
	return x.Code, nil
}
