//go:build !linux

package console

import (
	"bufio"
	"net"
	"os"
)

// AttachOptions tune Attach (see the Linux implementation).
type AttachOptions struct {
	NoSignals  bool
	DetachKeys []byte
}

// ForwardedSignals are the signals Attach catches and forwards to the box.
var ForwardedSignals []os.Signal

// Conn is a connection to a shim socket after the hello exchange.
type Conn struct {
	*net.UnixConn
	R     *bufio.Reader
	Reply Reply
}

// Dial is not supported off Linux.
func Dial(socketPath string, hello Hello) (*Conn, error) { return nil, ErrNotSupported }

// CheckOwner is not supported off Linux.
func CheckOwner(path string) error { return ErrNotSupported }

// Attach is not supported off Linux.
func Attach(socketPath string, stdin, stdout, stderr *os.File, opts AttachOptions) (int, error) {
	return -1, ErrNotSupported
}
