package egress

import (
	"fmt"
	"net"
	"os"

	"github.com/agentbox/agentbox/internal/safesocket"
)

// checkPeer admits a process of the daemon's uid. The socket's 0700 directory already keeps
// other users out; this is the second lock.
func checkPeer(c *net.UnixConn) error {
	pid, uid, _, err := safesocket.PeerCred(c)
	if err != nil {
		return err
	}
	if uid != os.Getuid() {
		return fmt.Errorf("pid %d runs as uid %d, not uid %d", pid, uid, os.Getuid())
	}
	return nil
}
