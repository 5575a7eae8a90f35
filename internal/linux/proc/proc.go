// Package proc names a host process for good: by its pid and its start time (field 22 of
// /proc/<pid>/stat, clock ticks since boot), since a pid alone is reused once the process is
// reaped. The daemon re-adopts its shims and the readiness probe its boxes by them. Elsewhere
// than on Linux no process is found.
package proc

import "errors"

// ErrMalformed is the error of a /proc/<pid>/stat this package cannot read fields from.
var ErrMalformed = errors.New("malformed /proc/<pid>/stat")
