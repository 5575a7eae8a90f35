package sshbroker

import (
	"fmt"
	"net"

	"github.com/agentbox/agentbox/internal/safesocket"
)

// checkPeer admits a connection from a process of the daemon's uid (safesocket.CheckPeerUID):
// a box runs as the user in its own user namespace, which is why safesocket's same-namespace
// check does not apply here. A connection a bounding listener admitted (connlimit) is
// unwrapped first.
func checkPeer(c net.Conn) error {
	if w, ok := c.(interface{ Unwrap() net.Conn }); ok {
		c = w.Unwrap()
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a unix connection")
	}
	_, err := safesocket.CheckPeerUID(uc)
	return err
}
