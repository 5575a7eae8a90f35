// Package caps drops a process's capabilities for good: what the exec stage does on the thread
// that execs a box's program, so that not even a uid 0 program regains any.
package caps

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// DropAll empties the bounding, ambient, effective, permitted and inheritable sets and
// locks the securebits, so that not even a uid 0 program (agentbox run by root) regains any.
func DropAll() error {
	// SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_NO_CAP_AMBIENT_RAISE, each locked, and
	// SECBIT_KEEP_CAPS locked off (linux/securebits.h).
	const (
		noRoot, noRootLocked                 = 1 << 0, 1 << 1
		noSetuidFixup, noSetuidFixupLocked   = 1 << 2, 1 << 3
		keepCapsLocked                       = 1 << 5
		noAmbientRaise, noAmbientRaiseLocked = 1 << 6, 1 << 7
		secbits                              = noRoot | noRootLocked | noSetuidFixup | noSetuidFixupLocked | keepCapsLocked | noAmbientRaise | noAmbientRaiseLocked
	)
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secbits, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the last capability the kernel knows
			}
			return fmt.Errorf("bounding set: drop %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("ambient set: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
