package engine

import (
	"errors"

	"github.com/agentbox/agentbox/internal/api"
)

// Error classes of box start-up. Each has a stable code (Code) used on the wire.
var (
	ErrUnknownEngine   = errors.New("unknown engine")
	ErrNotSupported    = errors.New("engine not supported on this platform")
	ErrBoxSetup        = errors.New("box setup failed")
	ErrProgramNotFound = errors.New("program not found in box")
	ErrProgramNotExec  = errors.New("program not executable in box")
	ErrControlClosed   = errors.New("box control channel closed")
)

// Codes are the stable wire codes of box start-up failures (the strings are api's table).
const (
	CodeBoxSetupFailed    = api.CodeBoxSetupFailed
	CodeProgramNotFound   = api.CodeProgramNotFound
	CodeProgramNotExec    = api.CodeProgramNotExec
	CodeUnknownEngine     = api.CodeUnknownEngine
	CodeEngineUnsupported = api.CodeEngineUnsupported
)

// ErrorForCode maps a wire code back to its error class (ErrBoxSetup for unknown codes).
func ErrorForCode(code string) error {
	switch code {
	case CodeProgramNotFound:
		return ErrProgramNotFound
	case CodeProgramNotExec:
		return ErrProgramNotExec
	case CodeUnknownEngine:
		return ErrUnknownEngine
	case CodeEngineUnsupported:
		return ErrNotSupported
	}
	return ErrBoxSetup
}
