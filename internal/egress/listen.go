package egress

import (
	"fmt"
	"log"
	"net"
	"os"

	"github.com/agentbox/agentbox/internal/safesocket"
)

// Listen listens on a unix socket at path (a launch's run directory, 0700), replacing a stale
// socket from before a daemon restart but nothing else, and makes it 0600. Its Accept admits
// only peers running as the daemon's uid (SO_PEERCRED): box-init's forwarder, whose box runs
// as the user in its own user namespace. Where peer credentials are unavailable (not Linux)
// every connection is closed.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("egress proxy: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("egress proxy: remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("egress proxy: listen: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("egress proxy: listen: %w", err)
	}
	return &peerListener{UnixListener: ln}, nil
}

type peerListener struct {
	*net.UnixListener
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.UnixListener.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if _, err := safesocket.CheckPeerUID(c); err != nil {
			log.Printf("egress: refused a connection on %s: %v", l.Addr(), err)
			c.Close()
			continue
		}
		return c, nil
	}
}
