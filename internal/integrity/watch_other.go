//go:build !linux

package integrity

import "context"

// Open does nothing off Linux: there is no inotify, and Run checks periodically.
func (w *Watcher) Open() error { return nil }

// inotifier is Linux's.
type inotifier struct{}

// Run verifies the state every Interval until ctx ends (no inotify off Linux).
func (w *Watcher) Run(ctx context.Context) error {
	w.periodic(ctx)
	return nil
}
