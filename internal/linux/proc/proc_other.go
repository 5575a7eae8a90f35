//go:build !linux

package proc

import (
	"errors"
	"time"
)

var errNotSupported = errors.New("proc: not supported on this system")

// StartTime needs Linux (/proc); elsewhere it fails.
func StartTime(pid int) (uint64, error) { return 0, errNotSupported }

// Parent needs Linux; elsewhere it fails.
func Parent(pid int) (int, error) { return 0, errNotSupported }

// Same needs Linux; elsewhere no process is the same.
func Same(pid int, start uint64) bool { return false }

// Ended needs Linux; elsewhere every process has ended.
func Ended(pid int) bool { return true }

// WaitEnded needs Linux; elsewhere every process has ended.
func WaitEnded(pid int, max time.Duration) bool { return true }

// WaitPidfd needs Linux; elsewhere there is no pidfd, and nothing to wait for: true.
func WaitPidfd(fd int, max time.Duration) bool { return true }

// State needs Linux (/proc); elsewhere it fails.
func State(pid int) (byte, error) { return 0, errNotSupported }

// CPUTicks needs Linux (/proc); elsewhere it fails.
func CPUTicks(pid int) (uint64, error) { return 0, errNotSupported }

// ReadMachineCPU needs Linux (/proc); elsewhere it fails.
func ReadMachineCPU() (MachineCPU, error) { return MachineCPU{}, errNotSupported }

// Handle is a process held open; Linux only.
type Handle struct{}

// OpenIn needs Linux (pidfd); elsewhere it fails.
func OpenIn(pid int, pidNS uint64) (*Handle, error) { return nil, errNotSupported }

// Wait has nothing to wait for elsewhere: true.
func (h *Handle) Wait(max time.Duration) bool { return true }

// Close does nothing.
func (h *Handle) Close() {}
