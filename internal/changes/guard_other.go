//go:build !linux

package changes

import (
	"errors"
	"time"

	"github.com/agentbox/agentbox/internal/plan"
)

// ErrNotSupported is returned where guarding and applying need Linux (openat2, inotify).
var ErrNotSupported = errors.New("proposed changes need Linux")

// Guard is Linux-only.
type Guard struct {
	// Captured is never called.
	Captured func(path string)
}

// Open fails with ErrNotSupported.
func Open(dir string, guards []plan.Guard, watch bool) (*Guard, error) { return nil, ErrNotSupported }

// Add fails with ErrNotSupported.
func (g *Guard) Add(gd plan.Guard) error { return ErrNotSupported }

// Added fails with ErrNotSupported.
func Added(dir string) ([]plan.Guard, error) { return nil, ErrNotSupported }

// Scan does nothing.
func (g *Guard) Scan() error { return ErrNotSupported }

// Run does nothing.
func (g *Guard) Run() {}

// Instance is -1: no inotify instance.
func (g *Guard) Instance() int { return -1 }

// Finish does nothing.
func (g *Guard) Finish() error { return nil }

// Close does nothing.
func (g *Guard) Close() error { return nil }

// Apply fails with ErrNotSupported.
func Apply(dir, ws, rel string) error { return ErrNotSupported }

// WayBlocked reports false: no change is applied on this system.
func WayBlocked(ws, rel string) bool { return false }

// Stage stages nothing: it returns ps unchanged (bound read-only).
func Stage(dir string, ps []plan.Protected) ([]plan.Protected, error) { return ps, nil }

// Collect fails with ErrNotSupported.
func Collect(dir, storeDir string) (Collected, error) { return Collected{}, ErrNotSupported }

// TakeIgnored fails with ErrNotSupported.
func TakeIgnored(dir, ws string, rels []string, since time.Time) (Ignored, error) {
	return Ignored{}, ErrNotSupported
}

func TakeHidden(dir, ws, rel string, base []byte) (bool, error) { return false, ErrNotSupported }
