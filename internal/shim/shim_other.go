//go:build !linux

package shim

import (
	"errors"
	"os"
	"syscall"
)

// ErrNotSupported is returned off Linux.
var ErrNotSupported = errors.New("box shim not supported on this platform")

// Executable is the program Start runs as `EXE box-shim L`.
var Executable = "/proc/self/exe"

// Main is the entry point of `agentbox box-shim LAUNCHDIR`; it fails off Linux.
func Main(args []string) int { return 1 }

// Start is not supported off Linux.
func Start(launchDir string) (Proc, error) { return Proc{}, ErrNotSupported }

// Proc identifies a shim process: its pid and start time.
type Proc struct {
	Pid       int
	StartTime uint64
}

// Query is not supported off Linux.
func Query(launchDir string) (*Status, error) { return nil, ErrNotSupported }

// Watcher is the daemon's connection to a shim.
type Watcher struct {
	Events <-chan Event
}

// Watch is not supported off Linux.
func Watch(launchDir string) (*Watcher, error) { return nil, ErrNotSupported }

// Stop is not supported off Linux.
func (w *Watcher) Stop() error { return ErrNotSupported }

// Signal is not supported off Linux.
func (w *Watcher) Signal(sig syscall.Signal) error { return ErrNotSupported }

// Close is not supported off Linux.
func (w *Watcher) Close() error { return ErrNotSupported }

// Spare is a shim started ahead of its launch; not supported off Linux.
type Spare struct{}

// StartSpare is not supported off Linux.
func StartSpare() (*Spare, error) { return nil, ErrNotSupported }

// Pid is 0 off Linux.
func (s *Spare) Pid() int { return 0 }

// Proc is zero off Linux.
func (s *Spare) Proc() Proc { return Proc{} }

// Launch is not supported off Linux.
func (s *Spare) Launch(launchDir string) (Proc, error) { return Proc{}, ErrNotSupported }

// Close does nothing off Linux.
func (s *Spare) Close() error { return nil }

// Handed is a launch handed to a spare shim; not supported off Linux.
type Handed struct{}

// Hand is not supported off Linux.
func (s *Spare) Hand(launchDir string) (*Handed, error) { return nil, ErrNotSupported }

// Wait is not supported off Linux.
func (h *Handed) Wait() (Proc, error) { return Proc{}, ErrNotSupported }

// Close does nothing off Linux.
func (h *Handed) Close() error { return nil }

// HoldListener is not supported off Linux.
func HoldListener(launchDir string, ln syscall.Conn) error { return ErrNotSupported }

// TakeListener is not supported off Linux.
func TakeListener(launchDir string) (*os.File, error) { return nil, ErrNotSupported }
