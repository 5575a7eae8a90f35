package daemon

import (
	"fmt"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/connlimit"
	"github.com/agentbox/agentbox/internal/relay"
	"github.com/agentbox/agentbox/internal/sshbroker"
)

// Connection bounds of the brokers (docs/security.md). A launch's relay channel (LLM and git
// relays) and its egress proxy each hold at most perLaunchConns connections; the shared
// loopback relay listener (egress: allow boxes, manual sessions) at most sharedConns; a
// launch's ssh agent socket and each ssh leg sshbroker.DefaultMaxConns; and all of them
// together no more than the descriptor limit less descriptorReserve, which is kept for
// the daemon's own work: launches, shims, the store, the integrity watch and its clean-up.
const (
	perLaunchConns    = 256
	sharedConns       = 1024
	descriptorReserve = 1024
)

// connBudget returns the budget of broker connections for a process whose descriptor limit
// is nofile: all but descriptorReserve, and never more than half of a small limit.
func connBudget(nofile uint64) *connlimit.Budget {
	n := int64(nofile) - descriptorReserve
	if half := int64(nofile / 2); n < half {
		n = half
	}
	return connlimit.NewBudget(int(n))
}

// connLimiter bounds a broker listener's connections: Daemon.limitConns, given to the brokers.
type connLimiter func(ln net.Listener, max int, what, launch string) net.Listener

// bound returns ln bounded by l, or ln itself when l is nil (no bounds).
func (l connLimiter) bound(ln net.Listener, max int, what, launch string) net.Listener {
	if l == nil {
		return ln
	}
	return l(ln, max, what, launch)
}

// limitConns bounds an HTTP broker listener (max connections of its own, and the daemon's
// budget). A connection past a bound gets 503 too_many_connections with the reason, which the
// program in the box sees; the first refusal of a listener is logged, not every one.
func (d *Daemon) limitConns(ln net.Listener, max int, what, launch string) net.Listener {
	var logged atomic.Bool
	return connlimit.Listen(ln, connlimit.Config{Max: max, Budget: d.conns, Refuse: func(c net.Conn, why connlimit.Refusal) {
		msg := fmt.Sprintf("agentbox: the %s holds %d connections open, the most it may: close idle connections and retry", what, max)
		if why == connlimit.BudgetFull {
			msg = "agentbox: the daemon holds the most broker connections it may (the rest of its descriptors are kept for its own work): retry when others close"
		}
		body := relay.ErrorJSON(api.CodeTooManyConnections, msg)
		c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)))
		if !logged.Swap(true) {
			d.log.Warn("broker connection refused: too many connections", "listener", what, "launch", launch, "max", max,
				"budget", why == connlimit.BudgetFull, "held", d.conns.Used())
		}
	}})
}

// limitSSH bounds an ssh broker listener (an agent socket or a leg, whose own cap the broker
// keeps) by the daemon's budget of broker connections. A connection past it is answered in the
// ssh client's terms (refuse: the agent's failure reply, the leg's disconnect with the reason,
// which ssh prints), then closed; the first refusal of a listener is logged.
func (d *Daemon) limitSSH(ln net.Listener, what, launch string, refuse sshbroker.Refusal) net.Listener {
	var logged atomic.Bool
	return connlimit.Listen(ln, connlimit.Config{Budget: d.conns, Refuse: func(c net.Conn, _ connlimit.Refusal) {
		if refuse != nil {
			refuse(c, "the daemon holds the most broker connections it may (the rest of its descriptors are kept for its own work); retry when others close")
		}
		if !logged.Swap(true) {
			d.log.Warn("broker connection refused: too many connections", "listener", what, "launch", launch,
				"budget", true, "held", d.conns.Used())
		}
	}})
}
