//go:build !linux

package integrity

import "context"

// Run verifies the state every Interval until ctx ends (no inotify off Linux).
func (w *Watcher) Run(ctx context.Context) error {
	w.periodic(ctx)
	return nil
}
