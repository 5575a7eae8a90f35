// Package proc names a host process for good: by its pid and its start time (field 22 of
// /proc/<pid>/stat, clock ticks since boot), since a pid alone is reused once the process is
// reaped. The daemon re-adopts its shims and the readiness probe its boxes by them. Elsewhere
// than on Linux no process is found.
package proc

import "errors"

// ErrMalformed is the error of a /proc/<pid>/stat, or a /proc/stat, this package cannot read
// fields from.
var ErrMalformed = errors.New("malformed /proc stat file")

// MachineCPU is CPU time since boot from /proc/stat's cpuN lines, in clock ticks (USER_HZ)
// summed over the CPUs counted, and how many CPUs that is.
type MachineCPU struct {
	Idle, Total uint64 // idle and iowait; all fields but guest time (counted in user time)
	CPUs        int
}

// IdleCores is how many CPUs' worth of time the machine spent idle between earlier and m:
// 1.5 on a machine with one core idle and another half busy. 0 when no tick passed.
func (m MachineCPU) IdleCores(earlier MachineCPU) float64 {
	if m.Total <= earlier.Total || m.Idle < earlier.Idle {
		return 0
	}
	return float64(m.Idle-earlier.Idle) * float64(m.CPUs) / float64(m.Total-earlier.Total)
}
