//go:build !linux

package daemon

import "errors"

// syncFS is syncfs(2), Linux only: elsewhere no overlay is mounted, volatile or not, and no
// record is dropped.
func syncFS(string) error { return errors.ErrUnsupported }
