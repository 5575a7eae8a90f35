//go:build !linux

package engine

import "os"

// ControlPair is not supported off Linux.
func ControlPair() (shimEnd, boxEnd *os.File, err error) { return nil, nil, ErrNotSupported }

// SendEvent is not supported off Linux.
func SendEvent(f *os.File, ev Event, fds ...int) error { return ErrNotSupported }

// RecvEvent is not supported off Linux.
func RecvEvent(f *os.File) (Event, []int, error) { return Event{}, nil, ErrNotSupported }
