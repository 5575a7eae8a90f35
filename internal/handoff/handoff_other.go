//go:build !linux

package handoff

import (
	"errors"
	"net"
	"syscall"
)

// Send is not supported off Linux (there are no boxes there).
func Send(*net.UnixConn, syscall.Conn) error { return errors.ErrUnsupported }

// Listener returns ln: off Linux, no connection is handed over.
func Listener(ln net.Listener) net.Listener { return ln }
