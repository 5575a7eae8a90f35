package sshbroker

import (
	"fmt"
	"net"

	"github.com/agentbox/agentbox/internal/safesocket"
)

// checkPeer admits a connection from a process of the daemon's uid (safesocket.CheckPeerUID):
// a box runs as the user in its own user namespace, which is why safesocket's same-namespace
// check does not apply here.
func checkPeer(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a unix connection")
	}
	_, err := safesocket.CheckPeerUID(uc)
	return err
}
