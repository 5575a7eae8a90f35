//go:build !linux

package integrity

// Resolve is not supported off Linux.
func Resolve(ws string, extra []string) (*Layout, error) { return nil, ErrNotSupported }
