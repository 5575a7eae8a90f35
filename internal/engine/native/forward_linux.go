package native

import (
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/agentbox/agentbox/internal/handoff"
	"github.com/agentbox/agentbox/internal/plan"
)

// startForwards listens on each forward's in-box loopback port and hands every connection
// over to its unix socket (an in-box path, under /run/agentbox), which the daemon may
// re-create at any time: the socket is dialled per connection, never held.
func startForwards(fwds []plan.Forward) error {
	for _, f := range fwds {
		ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Port)))
		if err != nil {
			return fmt.Errorf("forward port %d: %w", f.Port, err)
		}
		go serveForward(ln, f.Socket)
	}
	return nil
}

func serveForward(ln net.Listener, socket string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go forward(c.(*net.TCPConn), socket)
	}
}

// forward hands c over to the daemon on a new connection to socket (handoff.Send): the
// daemon then reads and writes c itself, and no byte passes through box-init. Should the
// handover fail, it relays instead: it copies both ways between c and another connection to
// socket, passing each half-close on.
func forward(c *net.TCPConn, socket string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		return // the client sees the connection close: the broker is not there
	}
	err = handoff.Send(u.(*net.UnixConn), c)
	u.Close()
	if err == nil {
		return
	}
	if u, err = net.Dial("unix", socket); err != nil {
		return
	}
	uc := u.(*net.UnixConn)
	defer uc.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(uc, c)
		uc.CloseWrite()
		close(done)
	}()
	io.Copy(c, uc)
	c.CloseWrite()
	<-done
}
