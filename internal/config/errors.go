package config

import (
	"errors"
	"fmt"
)

// Error classes of the package, checked with errors.Is.
var (
	// ErrInvalid means a config or policy file was refused: a YAML syntax error, an unknown key,
	// a wrong type or an invalid value. errors.As with *InvalidError gives the file, position and
	// field. Nothing of a refused file applies.
	ErrInvalid = errors.New("invalid configuration")
	// ErrUnsafePolicy means the system policy file (or its directory) is not owned by root or is
	// writable by group or others, so it cannot be trusted to lock anything. Load refuses to
	// go on rather than run without the policy.
	ErrUnsafePolicy = errors.New("unsafe system policy")
	// ErrNotSupported means the policy's owner cannot be checked on this platform.
	ErrNotSupported = errors.New("not supported on this platform")
)

// InvalidError describes why a file was refused. It matches ErrInvalid.
type InvalidError struct {
	File   string // path of the file as given
	Line   int    // 1-based; 0 when the error has no position (e.g. file too large)
	Column int    // 1-based; 0 when unknown
	Field  string // dotted key path ("console.clipboard"); "" for syntax errors
	Msg    string // what is wrong and, where it helps, what is allowed
}

// Error formats e as "file:line:col: field: message".
func (e *InvalidError) Error() string {
	s := e.File
	if e.Line > 0 {
		s += fmt.Sprintf(":%d", e.Line)
		if e.Column > 0 {
			s += fmt.Sprintf(":%d", e.Column)
		}
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Msg
}

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }
