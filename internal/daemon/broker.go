package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/recordlimit"
	"github.com/agentbox/agentbox/internal/relay/session"
	"github.com/agentbox/agentbox/internal/sshbroker"
)

// The daemon's brokers (internal/broker), each in a file of this package.
var (
	_ broker.Broker      = (*relayBroker)(nil)
	_ broker.Independent = (*integrityBroker)(nil)
	_ broker.Broker      = (*sshBroker)(nil)
	_ broker.Broker      = (*egressBroker)(nil)
)

// brokerHooks replace what the brokers reach on the host, in tests.
type brokerHooks struct {
	// egressResolver resolves names for every launch's egress proxy instead of the host's
	// resolver.
	egressResolver egress.Resolver
	// sshConfig replaces the git.ssh section of the configuration.
	sshConfig func(config.Config) sshbroker.Config
	// sshKnownHosts lists the known_hosts files seeded into boxes instead of the user's and
	// the system's.
	sshKnownHosts []string
	// beforeIntegritySave runs on the goroutine of a launch's first save of its integrity
	// state, before the write.
	beforeIntegritySave func(id string)
}

// startBrokers opens the pairing registry and the audit writer the brokers share, and builds
// the brokers from them in preparation order: the relay first (it creates the launch's pairing
// session, which the ssh broker watches and whose pairing the egress proxy takes), the
// integrity watch alongside (it needs nothing of the others), the ssh broker before the egress
// proxy (whose port must not take a leg's). Call it once the store is open.
func (d *Daemon) startBrokers() error {
	cfg := d.currentConfig()
	d.audits = d.db.NewAuditWriter(auditLinger, func(f string, a ...any) {
		d.log.Warn(fmt.Sprintf(f, a...), "broker", "relay")
	})
	reg, err := session.Open(d.ctx, session.Config{
		Max:            cfg.Sessions.Max,
		IdleTimeout:    cfg.Sessions.IdleTimeout.Duration(),
		AllowedClients: cfg.Sessions.AllowedClients,
		Persister:      storeSessions{d.db},
		Logf:           func(f string, a ...any) { d.log.Info(fmt.Sprintf(f, a...), "broker", "relay") },
	})
	if err != nil {
		d.audits.Close()
		return fmt.Errorf("pairing sessions: %w", err)
	}
	d.sessions = reg
	go reg.Run(d.ctx)

	hooks := d.opts.brokers
	// A launch's relay, git, egress and ssh records draw on one budget: a box that floods its
	// brokers adds a bounded number of rows and log lines (internal/recordlimit).
	d.records = &recordlimit.Budgets{MaxRows: func() int64 {
		return int64(d.currentConfig().WithDefaults().Audit.MaxRowsPerLaunch)
	}}
	d.relay = newRelayBroker(relayDeps{Sessions: reg, Audits: d.audits, Store: d.db, RuntimeDir: d.runtimeDir,
		TakeShared: d.takeRelayListener, StateDir: d.stateDir, Limit: d.limitConns, Records: d.records, Log: d.log})
	d.integrity = newIntegrityBroker(integrityDeps{RuntimeDir: d.runtimeDir, StateDir: d.stateDir, Helper: d.helper,
		Drift: d.store, Log: d.log, beforeSave: hooks.beforeIntegritySave})
	ssh := newSSHBroker(sshDeps{Sessions: reg, ConfigOf: hooks.sshConfig, KnownHosts: hooks.sshKnownHosts, StateDir: d.stateDir,
		Records: d.records, Bound: d.limitSSH, Log: d.log})
	d.egress = newEgressBroker(egressDeps{Sessions: reg, Audits: d.audits, Store: d.db, StateDir: d.stateDir, Limit: d.limitConns,
		Resolver: hooks.egressResolver, Records: d.records, Log: d.log})
	d.brokers = broker.List{Brokers: []broker.Broker{d.relay, d.integrity, ssh, d.egress}, Log: d.log}
	// What an earlier daemon's rate limits held back and did not write, before a launch is
	// re-adopted (its brokers start new journals) and before the counters are read.
	d.replayHeld()
	// Sessions created by hand outlive a daemon restart, and so does the loopback listener
	// their clients use.
	d.relay.resumeShared(cfg)
	return nil
}

// prepareBrokers runs every broker's Prepare (broker.List.Prepare): on a failure the ones
// already prepared are ended and the launch fails closed.
func (d *Daemon) prepareBrokers(ctx context.Context, bl *broker.Launch, c *plan.Contributions) error {
	return d.brokers.Prepare(ctx, bl, c)
}

// resumeBrokers re-creates the host side of a re-adopted launch; a failure is logged (the box
// keeps running; what the broker served is unavailable until it ends).
func (d *Daemon) resumeBrokers(ctx context.Context, bl *broker.Launch) {
	d.brokers.Resume(ctx, bl)
}

// endBrokers releases every broker's state for a launch (each writes the summaries of the
// records its rate limit held back), and the launch's record budget.
func (d *Daemon) endBrokers(id string) {
	d.brokers.End(id)
	d.records.End(id)
}

// recordFlusher is a broker whose rate limits hold back records (internal/recordlimit):
// flushHeldRecords writes their summaries now.
type recordFlusher interface{ flushHeldRecords() }

var (
	_ recordFlusher = (*relayBroker)(nil)
	_ recordFlusher = (*egressBroker)(nil)
	_ recordFlusher = (*sshBroker)(nil)
)

// stopBrokers runs when the daemon stops; boxes keep running. What the brokers' rate limits
// held back is written now, as counted summaries, so that the next daemon's totals count it;
// then the audit rows still queued are committed, before the store closes.
func (d *Daemon) stopBrokers() {
	for _, b := range d.brokers.Brokers {
		if f, ok := b.(recordFlusher); ok {
			f.flushHeldRecords()
		}
	}
	if d.audits != nil {
		d.audits.Close()
	}
}

// envOf returns the value of key in what the brokers contributed to the environment (the last
// one set), "" when none set it.
func envOf(c *plan.Contributions, key string) string {
	v := ""
	for _, kv := range c.Env {
		if after, ok := strings.CutPrefix(kv, key+"="); ok {
			v = after
		}
	}
	return v
}

// saveBrokerState writes v, as JSON, to the file name (launchdir) of bl's launch directory,
// which the box does not see: what a restarted daemon serves the launch again with
// (readBrokerState). what names the broker in the error.
func saveBrokerState(bl *broker.Launch, name, what string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(bl.RunDir), name), b, 0o600); err != nil {
		return fmt.Errorf("save %s state: %w", what, err)
	}
	return nil
}

// readBrokerState reads into v what saveBrokerState wrote for bl's launch; found is false when
// it wrote nothing (the broker had nothing to serve the launch).
func readBrokerState(bl *broker.Launch, name, what string, v any) (found bool, err error) {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(bl.RunDir), name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s state: %w", what, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("read %s state: %w", what, err)
	}
	return true, nil
}
