package sshbroker

import (
	"fmt"
	"net"
	"os"

	"github.com/agentbox/agentbox/internal/safesocket"
)

// checkPeer admits a connection from a process of the daemon's uid: a box runs as the user
// (in its own user namespace, which is why safesocket's same-namespace check does not apply
// here); the socket's 0700 directory already keeps other users out, and this is the second
// lock. Where peer credentials are not available (not Linux) every connection is refused.
func checkPeer(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a unix connection")
	}
	pid, uid, _, err := safesocket.PeerCred(uc)
	if err != nil {
		return err
	}
	if uid != os.Getuid() {
		return fmt.Errorf("pid %d runs as uid %d, not uid %d", pid, uid, os.Getuid())
	}
	return nil
}
