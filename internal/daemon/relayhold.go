package daemon

import (
	"errors"
	"net"
	"syscall"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/shim"
)

// The relay's shared loopback listener across a daemon restart (issue 21, finding 12;
// docs/security.md): each egress: allow launch's shim holds a duplicate of the listening socket
// while its box runs (holdRelayListener), so its port is never free while a box expects it,
// and a restarted daemon takes it back from one of them (takeRelayListener) instead of binding
// the port again.

// holdRelayListener hands the shim of launch l the shared listener when l uses it. A failure is
// logged: the box runs on, and only a restart of the daemon while no other shim holds the
// listener could lose the port (then the fallback revokes the sessions issued there).
func (d *Daemon) holdRelayListener(l *liveLaunch) {
	if d.relay == nil {
		return
	}
	ln, ok := d.relay.sharedOf(l.rec.ID).(syscall.Conn)
	if !ok {
		return
	}
	if err := shim.HoldListener(l.dir, ln); err != nil {
		d.log.Error("hand the relay's loopback listener to the launch's shim", "launch", l.rec.ID, "err", err)
	}
}

// takeRelayListener returns the shared listener a running launch's shim holds, bound to want
// (any when want is ""), or nil when none does.
func (d *Daemon) takeRelayListener(want string) net.Listener {
	running, err := d.store.Running(d.ctx)
	if err != nil {
		d.log.Error("list the running launches whose shims may hold the relay's loopback listener", "err", err)
		return nil
	}
	for _, sl := range running {
		f, err := shim.TakeListener(sl.LaunchDir)
		if err != nil {
			var re *console.ReplyError
			if !errors.Is(err, console.ErrShimGone) && !(errors.As(err, &re) && re.Code == api.CodeNotFound) {
				d.log.Warn("take the relay's loopback listener back from a shim", "launch", sl.ID, "err", err)
			}
			continue
		}
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			d.log.Warn("take the relay's loopback listener back from a shim", "launch", sl.ID, "err", err)
			continue
		}
		if want != "" && ln.Addr().String() != want {
			ln.Close()
			continue
		}
		return ln
	}
	return nil
}
