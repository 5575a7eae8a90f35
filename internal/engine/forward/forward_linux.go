// Package forward serves a box's loopback forwards from inside the box (its init process): a
// listener on each forward's in-box loopback port whose connections go to a unix socket of the
// daemon's (bound into the box), handed over whole where the server takes them.
package forward

import (
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/agentbox/agentbox/internal/handoff"
	"github.com/agentbox/agentbox/internal/plan"
)

// Start listens on each forward's in-box loopback port and relays every connection to
// its unix socket (an in-box path, under /run/agentbox), which the daemon may re-create at any
// time: the socket is dialled per connection, never held.
func Start(fwds []plan.Forward) error {
	for _, f := range fwds {
		ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Port)))
		if err != nil {
			return fmt.Errorf("forward port %d: %w", f.Port, err)
		}
		go serveForward(ln, f)
	}
	return nil
}

func serveForward(ln net.Listener, f plan.Forward) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if f.Handoff {
			go handOver(c.(*net.TCPConn), f.Socket)
		} else {
			go relay(c.(*net.TCPConn), f.Socket)
		}
	}
}

// handOver hands c over to the server on socket (handoff.Send), which then reads and writes c
// itself: no byte of the connection passes through box-init. Should the handover fail, it
// relays c instead.
func handOver(c *net.TCPConn, socket string) {
	u, err := net.Dial("unix", socket)
	if err != nil {
		c.Close() // the client sees the connection close: the broker is not there
		return
	}
	err = handoff.Send(u.(*net.UnixConn), c)
	u.Close()
	if err != nil {
		relay(c, socket)
		return
	}
	c.Close() // the server holds its own descriptor of the connection
}

// relay copies both ways between the TCP connection and a new connection to socket, passing
// each half-close on.
func relay(c *net.TCPConn, socket string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		return // the client sees the connection close: the broker is not there
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
