package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/recordlimit"
	"github.com/agentbox/agentbox/internal/relay/session"
	"github.com/agentbox/agentbox/internal/store"
)

// EgressPort is the in-box loopback port of a launch's egress proxy (the next free one when a
// broker before it took it).
const EgressPort = 3128

const (
	// egressSocket is the proxy's unix socket in the launch's run directory.
	egressSocket = "egress.sock"
	// auditKindEgress is the kind of the audit rows of the proxy (one per tunnel or request).
	auditKindEgress = "egress"
	// maxEndedEgressStats bounds the counters kept for ended launches.
	maxEndedEgressStats = 1024
)

// egressBroker runs the allowlist egress proxy of each launch with egress deny
// (internal/egress, docs/egress.md), with an empty allowlist too: then it refuses every target
// and says which key would allow it.
type egressBroker struct {
	egressDeps
	live broker.Launches[*egressLaunch]

	mu    sync.Mutex                 // guards ended and historyByID; taken before live's lock
	ended map[string]api.EgressStats // the counters of the launches this daemon ended

	// The counters of launches that ended under earlier daemons, from their audit rows, loaded
	// at the first listing (loadHistory).
	history     sync.Once
	historyByID map[string]api.EgressStats
}

// egressDeps is what the egress broker is built from.
type egressDeps struct {
	// Sessions is the daemon's pairing registry: a proxy admits only its launch's pairing.
	// Required: without it Prepare refuses every launch with egress deny.
	Sessions *session.Registry
	// Audits commits the proxy's audit rows, with the relay's, in batches; nil writes none.
	Audits *store.AuditWriter
	// Store reads the counters of launches that ran under earlier daemons; nil means none.
	Store *store.Store
	// Limit bounds a listener's connections (Daemon.limitConns); nil means unbounded.
	Limit connLimiter
	// StateDir keeps the journals of the records the proxies' rate limits hold back
	// (heldDir); "" means none.
	StateDir string
	// Resolver, when set (tests), resolves names for every launch's proxy instead of the
	// host's resolver.
	Resolver egress.Resolver
	// Records are the launches' record budgets (internal/recordlimit), shared with the relay
	// and the ssh broker; nil gives each proxy a budget of its own.
	Records *recordlimit.Budgets
	Log     *slog.Logger
}

func newEgressBroker(deps egressDeps) *egressBroker {
	return &egressBroker{egressDeps: deps, ended: map[string]api.EgressStats{}}
}

type egressLaunch struct {
	proxy *egress.Proxy
	ln    net.Listener
	base  api.EgressStats // counted before a daemon restart (from the audit log)
	// expected are the targets the launch's profile expects refused (expectedRefusals), with
	// the reason of each.
	expected map[string]string
}

// egressState is what launchdir.EgressStateFile holds.
type egressState struct {
	Allow []string `json:"allow"`
	Port  int      `json:"port"`
}

func (b *egressBroker) Name() string { return "egress" }

func (b *egressBroker) Prepare(ctx context.Context, bl *broker.Launch, c *plan.Contributions) error {
	if bl.Egress != plan.EgressDeny {
		return nil // the box shares the host network
	}
	// Also with an empty allowlist: the proxy then refuses every target at once, with the key
	// that would allow it, where a tool without a proxy would wait on a name it cannot resolve.
	allow, err := egress.ParseAllowlist(bl.Config.EgressAllow)
	if err != nil {
		return &api.Error{Code: api.CodeConfigInvalid, Message: "egressAllow: " + err.Error(), Hint: "fix egressAllow in your config (docs/egress.md)"}
	}
	// The launch's pairing, created by the relay broker, is the proxy's only credential.
	pairing := envOf(c, EnvPairing)
	if pairing == "" || b.Sessions == nil {
		return errors.New("the egress proxy needs the launch's pairing session, and the relay broker gave none")
	}
	port := EgressPort
	for used := usedPorts(c.Forwards); used[port]; port++ {
	}
	if err := saveBrokerState(bl, launchdir.EgressStateFile, "egress proxy", egressState{Allow: bl.Config.EgressAllow, Port: port}); err != nil {
		return err
	}
	if err := b.start(bl.ID, bl.RunDir, allow, api.EgressStats{}, expectedRefusals(bl)); err != nil {
		return err
	}
	proxyURL := "http://agentbox:" + pairing + "@127.0.0.1:" + strconv.Itoa(port)
	c.Forwards = append(c.Forwards, plan.Forward{Port: port, Socket: plan.RunDir + "/" + egressSocket})
	c.Env = append(c.Env, egress.ProxyEnv(proxyURL)...)
	b.Log.Info("egress proxy", "launch", bl.ID, "port", port, "allow", strings.Join(bl.Config.EgressAllow, ","))
	return nil
}

func usedPorts(fs []plan.Forward) map[int]bool {
	m := map[int]bool{}
	for _, f := range fs {
		m[f.Port] = true
	}
	return m
}

func (b *egressBroker) Resume(ctx context.Context, bl *broker.Launch) error {
	var st egressState
	if found, err := readBrokerState(bl, launchdir.EgressStateFile, "egress proxy", &st); !found {
		return err // (nil: the launch started without an allowlist)
	}
	allow, err := egress.ParseAllowlist(st.Allow)
	if err != nil {
		return fmt.Errorf("egress proxy state: %w", err)
	}
	if b.Sessions == nil {
		return errors.New("no pairing registry")
	}
	return b.start(bl.ID, bl.RunDir, allow, b.countedBefore(ctx, bl.ID), expectedRefusals(bl))
}

// expectedRefusals returns the targets the launch's profile expects refused, with the reason
// of each (nil: none).
func expectedRefusals(bl *broker.Launch) map[string]string {
	set := profileSet(bl.Config)
	if set == nil {
		return nil
	}
	p := set.Get(bl.Profile)
	if p == nil || len(p.ExpectedRefusals) == 0 {
		return nil
	}
	m := make(map[string]string, len(p.ExpectedRefusals))
	for _, r := range p.ExpectedRefusals {
		m[r.Target] = r.Why
	}
	return m
}

// start serves a launch's proxy on its socket; its pairing is checked against the registry
// with the launch's scope, so that only this launch's pairing opens anything here.
func (b *egressBroker) start(id, runDir string, allow *egress.Allowlist, base api.EgressStats, expected map[string]string) error {
	ln, err := egress.Listen(filepath.Join(runDir, egressSocket))
	if err != nil {
		return err
	}
	p := &egress.Proxy{
		Allow:    allow,
		Sessions: b.Sessions,
		Scope:    session.Scope{LaunchID: id},
		Resolver: b.Resolver,
		Logf:     func(f string, a ...any) { b.Log.Info(fmt.Sprintf(f, a...), "broker", "egress") },
		Audit:    func(r egress.Record) { b.audit(id, r) },
		Records:  b.Records.Of(id),
		Journal:  heldJournal(b.StateDir, id, heldEgress),
		Commit:   b.commit,
	}
	go func() {
		if err := egress.Serve(b.Limit.bound(ln, perLaunchConns, "launch's egress proxy", id), p); err != nil {
			b.Log.Warn("egress proxy stopped", "launch", id, "err", err)
		}
	}()
	if old, ok := b.live.Put(id, &egressLaunch{proxy: p, ln: ln, base: base, expected: expected}); ok {
		b.stop(old)
	}
	return nil
}

func (b *egressBroker) End(id string) {
	// The proxy is closed first, while launchStats still finds it live: Close returns once
	// every request it took is counted, so the counters kept are final.
	if l, ok := b.live.Get(id); ok {
		b.stop(l)
	}
	b.mu.Lock() // (taken and counted as ended at once: launchStats finds it in one or the other)
	l, ok := b.live.Take(id)
	if !ok {
		b.mu.Unlock()
		return
	}
	if len(b.ended) >= maxEndedEgressStats {
		for k := range b.ended {
			delete(b.ended, k)
			break
		}
	}
	b.ended[id] = l.stats()
	b.mu.Unlock()
}

// flushHeldRecords writes the summaries of the records each live proxy's rate limit holds
// back; the daemon calls it when it stops, before it commits the audit rows queued.
func (b *egressBroker) flushHeldRecords() {
	for _, l := range b.live.All() {
		l.proxy.FlushRecords()
	}
}

// stop closes a launch's socket and its proxy: open tunnels are cut and logged as closed.
func (b *egressBroker) stop(l *egressLaunch) {
	if err := l.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		b.Log.Warn("close egress proxy socket", "err", err)
	}
	l.proxy.Close()
}

func (l *egressLaunch) stats() api.EgressStats {
	s := l.proxy.Stats()
	out := l.base
	out.Allowed += s.Allowed
	out.Refused += s.Refused
	out.Failed += s.Failed
	out.BytesUp += s.BytesUp
	out.BytesDown += s.BytesDown
	if s.LastRefused != "" {
		out.LastRefused, out.LastRefusedReason = s.LastRefused, s.LastRefusedReason
	}
	for _, r := range s.Refusals {
		why, expected := l.expected[strings.ToLower(r.Target)]
		out.Refusals = append(out.Refusals, api.EgressRefusal{Target: r.Target, Key: r.Key, Expected: expected, Why: why})
	}
	return out
}

// egressStats returns a launch's egress counters, or nil when it had no proxy (while this
// daemon ran).
func (d *Daemon) egressStats(id string) *api.EgressStats {
	if d.egress == nil {
		return nil
	}
	return d.egress.launchStats(id)
}

func (b *egressBroker) launchStats(id string) *api.EgressStats {
	b.loadHistory()
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.live.Get(id); ok {
		s := l.stats()
		return &s
	}
	if s, ok := b.ended[id]; ok {
		return &s
	}
	if s, ok := b.historyByID[id]; ok {
		return &s
	}
	return nil
}

// egressAuditDetail is the detail of an egress audit row.
type egressAuditDetail struct {
	Session    string `json:"session,omitempty"`
	Method     string `json:"method"`
	Target     string `json:"target,omitempty"`
	Host       string `json:"host,omitempty"`
	Port       int    `json:"port,omitempty"`
	Addr       string `json:"addr,omitempty"`
	Decision   string `json:"decision"`
	Code       string `json:"code,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Detail     string `json:"detail,omitempty"`
	Status     int    `json:"status"`
	BytesUp    int64  `json:"bytesUp"`
	BytesDown  int64  `json:"bytesDown"`
	DurationMs int64  `json:"durationMs"`
	Outcome    string `json:"outcome,omitempty"`
	// Count is set on a summary row: that many requests of this decision were held back by
	// the proxy's rate limit (internal/recordlimit) and are counted here, not written one each.
	Count int64 `json:"count,omitempty"`
	// Targets are a summary row's most requested targets with their counts (at most
	// recordlimit.TopNames), and OtherTargets the count of its requests to any other target.
	Targets      []recordlimit.NameCount `json:"targets,omitempty"`
	OtherTargets int64                   `json:"otherTargets,omitempty"`
}

// audit queues one audit row per tunnel or request on the daemon's audit writer, which the
// relay broker shares: the rows of a burst of tunnels (npm install) are committed together with the
// relay's and git's, one fsync per batch, off every tunnel's path, in the order they were
// queued; the daemon commits what is still queued before it closes the store. The launch id
// is the proxy's, also for requests whose pairing was refused.
func (b *egressBroker) audit(launchID string, r egress.Record) {
	targets, others := r.Targets.Top(recordlimit.TopNames)
	detail, err := json.Marshal(egressAuditDetail{
		Session: r.SessionID, Method: r.Method, Target: r.Target, Host: r.Host, Port: r.Port, Addr: r.Addr,
		Decision: r.Decision, Code: r.Code, Reason: r.Reason, Detail: r.Detail, Status: r.Status,
		BytesUp: r.BytesUp, BytesDown: r.BytesDown, DurationMs: r.Duration.Milliseconds(), Outcome: r.Outcome,
		Count: r.Count, Targets: targets, OtherTargets: others,
	})
	if err != nil {
		b.Log.Warn("audit egress", "launch", launchID, "err", err)
		return
	}
	if b.Audits == nil {
		return
	}
	b.Audits.Add(&store.Audit{Time: r.Time, LaunchID: launchID, Kind: auditKindEgress, Detail: detail})
}

// countedBefore sums a re-adopted launch's audit rows, so that its counters survive a
// daemon restart.
func (b *egressBroker) countedBefore(ctx context.Context, id string) api.EgressStats {
	if b.Store == nil {
		return api.EgressStats{}
	}
	t, err := b.Store.EgressTotals(ctx, id)
	if err != nil {
		b.Log.Warn("read egress audit of re-adopted launch", "launch", id, "err", err)
		return api.EgressStats{}
	}
	return egressStats(t[id])
}

// loadHistory reads, once, the counters of every launch that used the proxy from the audit
// rows: those of launches that ended under an earlier daemon are shown from there.
func (b *egressBroker) loadHistory() {
	b.history.Do(func() {
		if b.Store == nil {
			return
		}
		totals, err := b.Store.EgressTotals(context.Background(), "")
		if err != nil {
			b.Log.Warn("egress counters of earlier launches", "err", err)
			return
		}
		m := make(map[string]api.EgressStats, len(totals))
		for id, t := range totals {
			m[id] = egressStats(t)
		}
		b.mu.Lock()
		b.historyByID = m
		b.mu.Unlock()
	})
}

func egressStats(t store.EgressTotals) api.EgressStats {
	return api.EgressStats{Allowed: t.Allowed, Refused: t.Refused, Failed: t.Failed, BytesUp: t.BytesUp, BytesDown: t.BytesDown,
		LastRefused: t.LastRefused, LastRefusedReason: t.LastRefusedReason}
}
