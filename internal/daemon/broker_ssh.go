package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/recordlimit"
	"github.com/agentbox/agentbox/internal/relay/session"
	"github.com/agentbox/agentbox/internal/sshbroker"
)

// sshBroker serves each launch's agent socket and ssh legs (internal/sshbroker) when
// git.ssh.hosts is configured; without it, it adds nothing to the plan.
type sshBroker struct {
	sshDeps
	live broker.Launches[*sshLaunch]
}

// sshDeps is what the ssh broker is built from.
type sshDeps struct {
	// Sessions is the daemon's pairing registry: revoking or ending a launch's session (the
	// relay broker's, prepared before this one) cuts the box's agent requests and ssh legs,
	// and a launch without a live session there is not served (Prepare and Resume fail).
	// nil: only End cuts them.
	Sessions *session.Registry
	// ConfigOf returns the git.ssh of a configuration; nil means its git.ssh section (tests
	// set another).
	ConfigOf func(config.Config) sshbroker.Config
	// KnownHosts, when set (tests), lists the known_hosts files seeded into boxes instead of
	// the user's and the system's.
	KnownHosts []string
	// Records are the launches' record budgets (internal/recordlimit), shared with the relay
	// and the egress proxy; nil gives each launch's ssh broker a budget of its own.
	Records *recordlimit.Budgets
	// StateDir keeps the journals of the lines the rate limits hold back (heldDir); "" means
	// none.
	StateDir string
	// Bound, when set, bounds each ssh listener of a launch by the daemon's budget of broker
	// connections (Daemon.limitSSH); nil: their own caps alone.
	Bound func(ln net.Listener, what, launch string, refuse sshbroker.Refusal) net.Listener
	Log   *slog.Logger
}

func newSSHBroker(deps sshDeps) *sshBroker {
	if deps.ConfigOf == nil {
		deps.ConfigOf = func(c config.Config) sshbroker.Config { return c.Git.SSH.Broker() }
	}
	return &sshBroker{sshDeps: deps}
}

type sshLaunch struct {
	l      *sshbroker.Launch
	cancel context.CancelFunc
}

func (b *sshBroker) Name() string { return "ssh" }

func (b *sshBroker) Prepare(ctx context.Context, bl *broker.Launch, c *plan.Contributions) error {
	cfg := b.ConfigOf(bl.Config)
	if !cfg.Enabled() {
		return nil
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := saveBrokerState(bl, launchdir.SSHStateFile, "ssh broker", cfg); err != nil {
		return err
	}
	l, err := b.start(bl, cfg, false)
	if err != nil {
		return err
	}
	add := l.Contributions()
	c.Env = append(c.Env, add.Env...)
	c.Forwards = append(c.Forwards, add.Forwards...)
	return nil
}

func (b *sshBroker) Resume(ctx context.Context, bl *broker.Launch) error {
	var cfg sshbroker.Config
	if found, err := readBrokerState(bl, launchdir.SSHStateFile, "ssh broker", &cfg); !found {
		return err // (nil: the launch started without ssh hosts)
	}
	_, err := b.start(bl, cfg, true)
	return err
}

func (b *sshBroker) start(bl *broker.Launch, cfg sshbroker.Config, resume bool) (*sshbroker.Launch, error) {
	// The broker's session: the launch's relay session when wired, and in any case the
	// launch's own life (end cancels it).
	// A launch without a live session (revoked, or ended while no daemon ran) is not served:
	// a restart must not give a revoked box its agent back.
	var sess *session.Session
	if b.Sessions != nil {
		if sess = b.Sessions.OfLaunch(bl.ID); sess == nil {
			return nil, fmt.Errorf("launch %s has no live pairing session (revoked or ended): its ssh agent and legs are not served", bl.ID)
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	if sess != nil {
		go func() {
			select {
			case <-sess.Done():
				cancel()
			case <-sctx.Done():
			}
		}()
	}
	l, err := sshbroker.Start(sshbroker.Options{
		Config:     cfg,
		RunDir:     bl.RunDir,
		Home:       bl.Home,
		KnownHosts: b.KnownHosts,
		Done:       sctx.Done(),
		Logger:     b.Log.With("launch", bl.ID),
		Resume:     resume,
		Records:    b.Records.Of(bl.ID),
		Journal:    heldJournal(b.StateDir, bl.ID, heldSSH),
		Bound:      b.bound(bl.ID),
	})
	if err != nil {
		cancel()
		return nil, err
	}
	if old, ok := b.live.Put(bl.ID, &sshLaunch{l: l, cancel: cancel}); ok {
		b.stop(bl.ID, old)
	}
	return l, nil
}

func (b *sshBroker) End(id string) {
	if sl, ok := b.live.Take(id); ok {
		b.stop(id, sl)
	}
}

// stop closes a launch's broker; what it cuts is logged as closed, not as revoked.
func (b *sshBroker) stop(id string, sl *sshLaunch) {
	if err := sl.l.Close(); err != nil {
		b.Log.Warn("close ssh broker", "launch", id, "err", err)
	}
	sl.cancel()
}

// flushHeldRecords logs the summaries of the lines each live launch's rate limit holds back;
// the daemon calls it when it stops.
func (b *sshBroker) flushHeldRecords() {
	for _, l := range b.live.All() {
		l.l.FlushRecords()
	}
}

// bound returns the launch's sshbroker.Options.Bound: nil without a daemon budget.
func (b *sshBroker) bound(launch string) func(net.Listener, string, sshbroker.Refusal) net.Listener {
	if b.Bound == nil {
		return nil
	}
	return func(ln net.Listener, what string, refuse sshbroker.Refusal) net.Listener {
		return b.Bound(ln, what, launch, refuse)
	}
}
