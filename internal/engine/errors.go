package engine

import "errors"

// Error classes of box start-up. Each has a stable code (Code) used on the wire.
var (
	ErrUnknownEngine   = errors.New("unknown engine")
	ErrNotSupported    = errors.New("engine not supported on this platform")
	ErrBoxSetup        = errors.New("box setup failed")
	ErrProgramNotFound = errors.New("program not found in box")
	ErrProgramNotExec  = errors.New("program not executable in box")
	ErrControlClosed   = errors.New("box control channel closed")
)

// Codes are the stable wire codes of box start-up failures.
const (
	CodeBoxSetupFailed    = "box_setup_failed"
	CodeProgramNotFound   = "program_not_found"
	CodeProgramNotExec    = "program_not_executable"
	CodeUnknownEngine     = "unknown_engine"
	CodeEngineUnsupported = "engine_not_supported"
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
