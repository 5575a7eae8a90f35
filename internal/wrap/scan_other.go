//go:build !linux

package wrap

// Canonicalize is not supported on this platform.
func Canonicalize(name, path, pathEnv string) (Target, error) {
	return Target{Name: name}, ErrNotSupported
}

// Scanner finds managed programs running outside every box; on this platform it does not run.
type Scanner struct {
	// Proc is the proc file system. "" means /proc.
	Proc string
}

// Scan is not supported on this platform.
func (Scanner) Scan([]Target) ([]Finding, error) { return nil, ErrNotSupported }

// Terminate is not supported on this platform.
func (Scanner) Terminate(Finding) error { return ErrNotSupported }
