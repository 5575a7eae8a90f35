package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/handoff"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/recordlimit"
	"github.com/agentbox/agentbox/internal/relay"
	gitrelay "github.com/agentbox/agentbox/internal/relay/git"
	"github.com/agentbox/agentbox/internal/relay/llm"
	"github.com/agentbox/agentbox/internal/relay/session"
	"github.com/agentbox/agentbox/internal/store"
)

// RelayPort is the in-box loopback port of a launch's relay channel (LLM and git relay).
// Every box has its own network namespace, so the fixed port never clashes.
const RelayPort = 7080

// relaySocket is the relay channel's unix socket in the launch's run directory.
const relaySocket = "relay.sock"

// Environment variables every box gets from the relay broker.
const (
	EnvRelayURL = "AGENTBOX_RELAY_URL"
	EnvPairing  = "AGENTBOX_PAIRING"
)

// relayBroker owns the pairing-session registry and serves each launch's relay channel: a unix
// socket in its run directory that box-init exposes on 127.0.0.1:RelayPort, accepting only that
// launch's pairing. With egress: allow the box shares the host network and reaches the relay on
// a shared host loopback listener instead, where the pairing is the only gate.
type relayBroker struct {
	relayDeps
	identity gitrelay.IdentityCache // the user's git identity for the generated gitconfig
	launches broker.Launches[*relayLaunch]

	mu    sync.Mutex                 // guards what follows; taken before launches' lock
	stats map[string]*api.RelayStats // by launch id
	// limits hold back the records of a flood, by launch id; "" for the requests of sessions
	// created by hand and those with no live pairing on the shared listener.
	limits  map[string]*relayLimits
	history sync.Once    // the counters of launches that ran under earlier daemons (loadHistory)
	shared  net.Listener // host loopback listener (egress: allow, manual sessions)
	sharedH *relay.Handler
	// movedFrom is the shared listener's remembered address when another process held it
	// (then it listens elsewhere); revokedMoved the sessions issued there, revoked since.
	movedFrom    string
	revokedMoved []string
}

// relayDeps is what the relay broker is built from.
type relayDeps struct {
	// Sessions is the daemon's pairing registry: the relay creates each launch's session there.
	Sessions *session.Registry
	// Audits commits the relay's and git's audit rows in batches, off the request path.
	Audits *store.AuditWriter
	// Store reads the counters of launches that ran under earlier daemons; nil means none.
	Store *store.Store
	// RuntimeDir keeps the shared loopback listener's port (relay-port) for the next daemon.
	RuntimeDir string
	// TakeShared returns the shared loopback listener itself, bound to want (any loopback
	// address when want is ""), when a running launch's shim holds it (Daemon.takeRelayListener):
	// a daemon that restarts serves on the very socket its boxes use, whose port no other
	// process could take meanwhile. nil, or a nil listener, means none is held.
	TakeShared func(want string) net.Listener
	// StateDir keeps the journals of the records the rate limits hold back (heldDir); ""
	// means none.
	StateDir string
	// Limit bounds a listener's connections (Daemon.limitConns); nil means unbounded.
	Limit connLimiter
	// Records are the launches' record budgets (internal/recordlimit), shared with the egress
	// proxy and the ssh broker; nil gives each launch's relay and git a budget of their own.
	Records *recordlimit.Budgets
	Log     *slog.Logger
}

// relayLimits are the rate limits of one launch's relay and git records.
type relayLimits struct {
	relay recordlimit.Limiter[relay.Record]
	git   recordlimit.Limiter[gitrelay.Event]
}

// auditLinger is how long the relay's audit rows gather before they are committed together:
// one fsync per batch instead of one per request, on no request's path. A row is in the store
// at most this long (plus the commit) after its response ended.
const auditLinger = 50 * time.Millisecond

type relayLaunch struct {
	sess *session.Session
	ln   net.Listener
}

func newRelayBroker(deps relayDeps) *relayBroker {
	return &relayBroker{relayDeps: deps, stats: map[string]*api.RelayStats{}, limits: map[string]*relayLimits{}}
}

// resumeShared starts the loopback listener again when sessions created by hand outlived a
// daemon restart: their clients use it, on its remembered port.
func (b *relayBroker) resumeShared(cfg config.Config) {
	for _, r := range b.Sessions.List() {
		if r.Kind == session.KindManual && r.State == session.StateLive {
			if _, err := b.sharedListener(cfg); err != nil {
				b.Log.Error("restart the relay loopback listener for live sessions", "err", err)
			}
			return
		}
	}
}

func (b *relayBroker) Name() string { return "relay" }

func (b *relayBroker) logf(format string, args ...any) {
	b.Log.Info(fmt.Sprintf(format, args...), "broker", "relay")
}

// handler builds the relay handler for a configuration and scope.
func (b *relayBroker) handler(cfg config.Config, scope session.Scope) (*relay.Handler, error) {
	llmRelay, err := llm.New(llmConfig(cfg.Gateway))
	if err != nil {
		return nil, &api.Error{Code: api.CodeConfigInvalid, Message: "gateway: " + err.Error(), Hint: "fix the gateway section of your config"}
	}
	gitRelay, err := gitrelay.New(cfg.Git.Relay(), gitrelay.Options{
		Logf:  b.gitLogf,
		Audit: b.gitAudit,
		Limit: func(ev *gitrelay.Event) bool {
			l := b.limitsOf(scope.LaunchID, ev.LaunchID, ev.SessionID)
			if l == nil {
				return true
			}
			if ev.Decision == gitrelay.DecisionAllow || ev.Decision == gitrelay.DecisionUpstream {
				return l.git.AdmitAllowed(gitrelay.LimitKey(ev), ev, time.Now())
			}
			return l.git.Admit(gitrelay.LimitKey(ev), ev, time.Now())
		},
	})
	if err != nil {
		return nil, &api.Error{Code: api.CodeConfigInvalid, Message: "git: " + err.Error(), Hint: "fix the git section of your config"}
	}
	return &relay.Handler{Sessions: b.Sessions, Scope: scope, Sandbox: llmRelay, Git: gitRelay, Logf: b.logf, Audit: b.audit,
		Limit: func(r *relay.Record) bool {
			b.count(r)
			l := b.limitsOf(scope.LaunchID, r.LaunchID, r.SessionID)
			if l == nil {
				return true
			}
			if r.Code == "" { // relayed to the model (the relay refused nothing)
				return l.relay.AdmitAllowed(relay.LimitKey(r), r, time.Now())
			}
			return l.relay.Admit(relay.LimitKey(r), r, time.Now())
		}}, nil
}

func (b *relayBroker) gitLogf(f string, a ...any) { b.Log.Info(fmt.Sprintf(f, a...), "broker", "git") }

// unpairedRecords is the key of the record budget of the requests on the shared listener whose
// pairing was refused (no session): any local user can send those, so they must not spend the
// budget of the sessions made by hand (issue #21).
const unpairedRecords = "\x00unpaired"

// limitsOf returns the rate limits of the records of a request on a channel of scope (a
// launch's; "" for the shared listener) by session sessionID of launch id: the launch's; on the
// shared listener, those of the sessions made by hand, or those of the requests whose pairing
// was refused (sessionID ""). A launch that ended has none: the few requests still ending are
// written.
func (b *relayBroker) limitsOf(scope, id, sessionID string) *relayLimits {
	switch {
	case scope != "":
		id = scope // a refused pairing on a launch's channel is the launch's flood
	case id == "" && sessionID == "":
		id = unpairedRecords
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.limits[id]; l != nil {
		return l
	}
	if _, live := b.launches.Get(id); id != "" && id != unpairedRecords && !live {
		return nil
	}
	l := b.newLimits(id)
	l.relay.Budget = b.Records.Of(id)
	l.git.Budget = l.relay.Budget
	b.limits[id] = l
	return l
}

// newLimits makes the rate limits of budget id's relay and git records (without a budget),
// with their journals.
func (b *relayBroker) newLimits(id string) *relayLimits {
	l := &relayLimits{}
	l.relay.Merge = relay.Merge
	l.relay.Write = func(sum *relay.Record) {
		b.logf("%s", relay.LogLine(sum))
		b.audit(*sum)
	}
	l.git.Merge = gitrelay.Merge
	l.git.Write = func(sum *gitrelay.Event) {
		b.gitLogf("%s", gitrelay.LogLine(sum))
		b.gitAudit(*sum)
	}
	logf := func(f string, a ...any) { b.Log.Error(fmt.Sprintf(f, a...), "broker", "relay") }
	l.relay.Journal, l.relay.Commit, l.relay.Logf = heldJournal(b.StateDir, id, heldRelay), b.commit, logf
	l.git.Journal, l.git.Commit, l.git.Logf = heldJournal(b.StateDir, id, heldGit), b.commit, logf
	return l
}

// replay writes the summaries of budget id's relay or git records held back in their journal
// by a daemon killed before it wrote them.
func (b *relayBroker) replay(id, kind string) (int, error) {
	l := b.newLimits(id)
	if kind == heldGit {
		return l.git.Replay()
	}
	return l.relay.Replay()
}

// commit returns once the audit rows queued are committed.
func (b *relayBroker) commit() {
	if b.Audits != nil {
		b.Audits.Sync()
	}
}

// flushHeldRecords writes the summaries of the records the rate limits hold back; the daemon
// calls it when it stops, before it commits the audit rows queued.
func (b *relayBroker) flushHeldRecords() {
	b.mu.Lock()
	ls := make([]*relayLimits, 0, len(b.limits))
	for _, l := range b.limits {
		ls = append(ls, l)
	}
	b.mu.Unlock()
	for _, l := range ls {
		l.relay.Flush()
		l.git.Flush()
	}
}

func llmConfig(g config.Gateway) llm.Config {
	conv := func(p config.GatewayProvider) llm.Gateway {
		return llm.Gateway{URL: p.URL, Credential: llm.Credential{
			File: p.Credential.File, Command: p.Credential.Command, TTL: p.Credential.TTL.Duration(), Header: p.Credential.Header,
		}, Allow: p.Allow, ServerTools: p.ServerTools}
	}
	return llm.Config{Anthropic: conv(g.Anthropic), OpenAI: conv(g.OpenAI), Gemini: conv(g.Gemini)}
}

func (b *relayBroker) Prepare(ctx context.Context, bl *broker.Launch, c *plan.Contributions) error {
	clientID := bl.Profile
	if clientID == "" {
		clientID = "generic"
	}
	// Saved with the launch's record (launchSessions), in the record stage's commit: the
	// pairing leaves the daemon only after it, in the box's environment.
	sess, pairing, err := b.Sessions.Create(ctx, session.Spec{Kind: session.KindLaunch, ClientID: clientID, LaunchID: bl.ID, Unsaved: true})
	if err != nil {
		switch {
		case errors.Is(err, session.ErrTooManySessions):
			return &api.Error{Code: api.CodeTooManySessions, Message: err.Error(), Hint: "end launches or revoke sessions (agentbox session list), or raise sessions.max"}
		case errors.Is(err, session.ErrClientNotAllowed):
			return &api.Error{Code: api.CodeForbidden, Message: err.Error(), Hint: "sessions.allowedClients in the system policy does not list " + clientID}
		}
		return err
	}
	fail := func(err error) error {
		if eerr := b.Sessions.End(context.WithoutCancel(ctx), sess.ID()); eerr != nil {
			b.Log.Warn("end session of failed launch", "launch", bl.ID, "err", eerr)
		}
		return err
	}
	relayURL, ln, err := b.listen(bl, bl.Config)
	if err != nil {
		return fail(err)
	}
	if ln != nil {
		// relay.Serve takes the connections box-init accepts on the port handed over: it
		// serves them itself, and box-init copies nothing.
		c.Forwards = append(c.Forwards, plan.Forward{Port: RelayPort, Socket: plan.RunDir + "/" + relaySocket, Handoff: true})
	}
	// The generated gitconfig: git in the box reaches allowed remotes through the relay with the
	// pairing as an extra header; the user's own git configuration is not visible.
	identity, err := b.identity.Read(ctx)
	if err != nil {
		b.Log.Debug("read git identity", "err", err)
	}
	gc, err := gitrelay.Gitconfig{RelayURL: relayURL, Pairing: pairing, Allow: bl.Config.Git.Allow,
		SSHHosts: bl.Config.Git.SSH.Broker().HostNames(), Identity: identity}.Bytes()
	if err != nil {
		return fail(closeErr(ln, fmt.Errorf("gitconfig: %w", err)))
	}
	if err := os.WriteFile(filepath.Join(bl.RunDir, "gitconfig"), gc, 0o600); err != nil {
		return fail(closeErr(ln, fmt.Errorf("gitconfig: %w", err)))
	}
	c.Env = append(c.Env, EnvRelayURL+"="+relayURL, EnvPairing+"="+pairing.Reveal())
	c.Env = append(c.Env, gitrelay.Env("")...)
	b.launches.Put(bl.ID, &relayLaunch{sess: sess, ln: ln}) // (one per launch: Prepare or Resume, never both)
	b.mu.Lock()
	if b.stats[bl.ID] == nil {
		b.stats[bl.ID] = &api.RelayStats{} // a new launch: nothing counted yet
	}
	b.mu.Unlock()
	return nil
}

func closeErr(ln net.Listener, err error) error {
	if ln != nil {
		ln.Close()
	}
	return err
}

// listen serves the launch's relay channel: its own unix socket under egress: deny, or the
// shared host loopback listener under egress: allow (then ln is nil).
func (b *relayBroker) listen(bl *broker.Launch, cfg config.Config) (relayURL string, ln net.Listener, err error) {
	if bl.Egress == plan.EgressAllow {
		addr, err := b.sharedListener(cfg)
		if err != nil {
			return "", nil, err
		}
		return "http://" + addr, nil, nil
	}
	h, err := b.handler(cfg, session.Scope{LaunchID: bl.ID})
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(bl.RunDir, relaySocket)
	os.Remove(path) // a stale socket of an earlier daemon (resume)
	ln, err = net.Listen("unix", path)
	if err != nil {
		return "", nil, fmt.Errorf("relay socket: %w", err)
	}
	go func() {
		// Bounded after the handoff, so that each connection box-init hands over counts.
		if err := relay.Serve(b.Limit.bound(handoff.Listener(ln), perLaunchConns, "launch's relay channel", bl.ID), h); err != nil {
			b.Log.Warn("relay channel stopped", "launch", bl.ID, "err", err)
		}
	}()
	return "http://127.0.0.1:" + strconv.Itoa(RelayPort), ln, nil
}

// sharedListener starts (once) the host loopback listener for boxes with egress: allow and for
// sessions created by hand. Its port is kept in the runtime directory so that a restarted
// daemon listens where running boxes expect it. When that port is taken (any local user can
// bind a loopback port while no daemon runs), the listener moves to another port and every
// session issued on the old one is revoked (relay-port takeover, docs/security.md): the manual
// sessions now, and the egress: allow launches as they are re-adopted (Resume).
func (b *relayBroker) sharedListener(cfg config.Config) (string, error) {
	addr, taken, err := b.listenShared(cfg)
	if err != nil || taken == "" {
		return addr, err
	}
	var ids []string
	for _, r := range b.Sessions.List() {
		if r.Kind == session.KindManual {
			ids = append(ids, r.ID)
		}
	}
	b.revokeIssued(taken, addr, ids)
	return addr, nil
}

// listenShared is sharedListener's listener; taken is the remembered address when another
// process holds it (then the listener moved), "" otherwise.
func (b *relayBroker) listenShared(cfg config.Config) (addr, taken string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shared != nil {
		return b.shared.Addr().String(), "", nil
	}
	h, err := b.handler(cfg, session.Scope{})
	if err != nil {
		return "", "", err
	}
	portFile := filepath.Join(b.RuntimeDir, "relay-port")
	want := "127.0.0.1:0"
	if p, err := os.ReadFile(portFile); err == nil {
		want = "127.0.0.1:" + strings.TrimSpace(string(p))
	}
	// The listener a running box's shim holds, when there is one: it never stopped listening.
	var ln net.Listener
	if b.TakeShared != nil {
		held := want
		if held == "127.0.0.1:0" {
			held = "" // (the port file is gone: whichever the shims hold)
		}
		if ln = b.TakeShared(held); ln != nil {
			b.Log.Info("relay loopback listener taken back from a running box's shim", "addr", ln.Addr().String())
		}
	}
	if ln == nil {
		ln, err = net.Listen("tcp", want)
	}
	if err != nil && want != "127.0.0.1:0" {
		b.Log.Warn("relay loopback listener: the remembered port is taken", "addr", want, "err", err)
		taken = want
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return "", "", fmt.Errorf("relay loopback listener: %w", err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if err := os.WriteFile(portFile, []byte(port+"\n"), 0o600); err != nil {
		b.Log.Warn("remember relay port", "err", err)
	}
	b.shared, b.sharedH = ln, h
	if taken != "" {
		b.movedFrom = taken
	}
	go relay.Serve(b.Limit.bound(ln, sharedConns, "relay loopback listener", ""), h)
	b.Log.Info("relay loopback listener (pairing-gated)", "addr", ln.Addr().String())
	return ln.Addr().String(), taken, nil
}

// revokeIssued revokes sessions issued on the shared listener's old address taken, which
// another process holds now: their clients still send their pairing (and prompts) there, and
// whoever holds it must not replay the pairing on the new address. Logged as an error and
// kept for /v0/info (RelayNotice).
func (b *relayBroker) revokeIssued(taken, now string, ids []string) {
	var revoked []string
	for _, id := range ids {
		if err := b.Sessions.Revoke(context.Background(), id); err != nil && !errors.Is(err, session.ErrNotFound) {
			b.Log.Error("revoke a session of the relay's old loopback address", "session", id, "err", err)
			continue
		}
		revoked = append(revoked, id)
	}
	if len(revoked) == 0 {
		return
	}
	b.mu.Lock()
	b.revokedMoved = append(b.revokedMoved, revoked...)
	b.mu.Unlock()
	b.Log.Error("the relay's loopback address was taken by another process while no daemon ran: its sessions are revoked",
		"old", taken, "new", now, "revoked", revoked)
}

// sharedOf returns the shared loopback listener when launch id uses it (egress: allow), for its
// shim to hold (Daemon.holdRelayListener); nil otherwise.
func (b *relayBroker) sharedOf(id string) net.Listener {
	l, ok := b.launches.Get(id)
	if !ok || l.ln != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.shared
}

// moved reports whether the shared listener could not keep its remembered address.
func (b *relayBroker) moved() bool { return b.movedFromAddr() != "" }

func (b *relayBroker) movedFromAddr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.movedFrom
}

// notice says, for /v0/info, when the shared listener could not keep its address and which
// sessions issued there were revoked; "" when nothing was.
func (b *relayBroker) notice() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.revokedMoved) == 0 {
		return ""
	}
	return fmt.Sprintf("the relay's loopback address %s was taken by another process while no daemon ran; it listens on %s now, "+
		"and the %d session(s) issued on the old address were revoked (%s): create new sessions (agentbox session create) "+
		"and restart the egress: allow launches, which still send their requests to the old address",
		b.movedFrom, b.shared.Addr(), len(b.revokedMoved), strings.Join(b.revokedMoved, ", "))
}

func (b *relayBroker) Resume(ctx context.Context, bl *broker.Launch) error {
	// The session itself was restored from the store when the registry opened.
	sess := b.Sessions.OfLaunch(bl.ID)
	if sess == nil {
		return fmt.Errorf("no live session for launch %s", bl.ID)
	}
	var ln net.Listener
	var err error
	if _, statErr := os.Stat(filepath.Join(bl.RunDir, relaySocket)); statErr == nil {
		_, ln, err = b.listen(&broker.Launch{ID: bl.ID, RunDir: bl.RunDir, Egress: plan.EgressDeny}, bl.Config)
	} else {
		var addr string
		if addr, err = b.sharedListener(bl.Config); err == nil && b.moved() {
			// The box sends its pairing to the old address, which another process holds.
			b.revokeIssued(b.movedFromAddr(), addr, []string{sess.ID()})
			return fmt.Errorf("the relay's loopback address moved (another process took it): launch %s's session is revoked", bl.ID)
		}
	}
	if err != nil {
		return err
	}
	// The counters go on from what the launch's audit rows say it did under the daemon before.
	var before api.RelayStats
	if b.Store != nil {
		if t, err := b.Store.RelayTotals(ctx, bl.ID); err == nil {
			before = relayStats(t[bl.ID])
		} else {
			b.Log.Warn("relay counters of a re-adopted launch", "launch", bl.ID, "err", err)
		}
	}
	b.launches.Put(bl.ID, &relayLaunch{sess: sess, ln: ln})
	b.mu.Lock()
	if b.stats[bl.ID] == nil {
		b.stats[bl.ID] = &before
	}
	b.mu.Unlock()
	return nil
}

func (b *relayBroker) End(id string) {
	b.mu.Lock() // (the launch and its limits go at once: limitsOf makes none for an ended launch)
	l, _ := b.launches.Take(id)
	lim := b.limits[id]
	delete(b.limits, id)
	b.mu.Unlock()
	if lim != nil {
		lim.relay.Close()
		lim.git.Close()
	}
	if err := b.Sessions.EndLaunch(context.Background(), id); err != nil && !errors.Is(err, session.ErrNotFound) {
		b.Log.Warn("end launch session", "launch", id, "err", err)
	}
	if l != nil && l.ln != nil {
		l.ln.Close()
	}
}

// session returns the live session of a launch, or nil.
func (b *relayBroker) session(launchID string) *session.Session {
	if l, ok := b.launches.Get(launchID); ok {
		return l.sess
	}
	return nil
}

// count adds one relay request to its launch's counters, whether its record is written or
// held back by the rate limit.
func (b *relayBroker) count(r *relay.Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.stats[r.LaunchID]; st != nil {
		st.Requests++
		st.LastStatus = r.Status
		st.InputTokens += r.Usage.InputTokens
		st.OutputTokens += r.Usage.OutputTokens
		if r.Outcome == relay.OutcomeCanceled {
			st.Canceled++
		}
	}
}

// audit writes the audit row of one relay request, or of a summary of those the rate limit
// held back (count and reason set); the log line is written by the router.
func (b *relayBroker) audit(r relay.Record) {
	d := map[string]any{
		"session": r.SessionID, "client": r.ClientID, "broker": r.Broker, "provider": r.Provider,
		"method": r.Method, "path": r.Path, "status": r.Status, "bytesIn": r.BytesIn, "bytesOut": r.BytesOut,
		"durationMs": r.Duration.Milliseconds(), "outcome": r.Outcome, "code": r.Code, "usage": r.Usage,
	}
	if r.Count > 0 {
		d["count"], d["reason"] = r.Count, relay.ReasonRateLimited
		d["targets"], d["otherTargets"] = r.Paths.Top(recordlimit.TopNames)
	}
	detail, _ := json.Marshal(d)
	b.Audits.Add(&store.Audit{Time: r.Time, LaunchID: r.LaunchID, Kind: "relay", Detail: detail})
}

func (b *relayBroker) gitAudit(ev gitrelay.Event) {
	// A summary's row names its most requested repositories, with their counts.
	row := struct {
		gitrelay.Event
		Targets      []recordlimit.NameCount `json:"targets,omitempty"`
		OtherTargets int64                   `json:"otherTargets,omitempty"`
	}{Event: ev}
	row.Targets, row.OtherTargets = ev.Repos.Top(recordlimit.TopNames)
	row.Repos = recordlimit.Tally{} // its top is Targets
	detail, err := json.Marshal(row)
	if err != nil {
		return
	}
	b.Audits.Add(&store.Audit{Time: time.Now(), LaunchID: ev.LaunchID, Kind: "git", Detail: detail})
}

// launchStats returns a copy of a launch's relay counters, or nil.
func (b *relayBroker) launchStats(id string) *api.RelayStats {
	b.loadHistory()
	b.mu.Lock()
	defer b.mu.Unlock()
	if st := b.stats[id]; st != nil {
		c := *st
		return &c
	}
	return nil
}

// loadHistory fills, once, the counters of the launches this daemon has none for from their
// audit rows: launches that ran under an earlier daemon, so that `agentbox launches` shows
// their relay activity after a restart too. (Launches this daemon prepared or re-adopted have
// theirs already, and count on from there.)
func (b *relayBroker) loadHistory() {
	b.history.Do(func() {
		if b.Store == nil {
			return
		}
		totals, err := b.Store.RelayTotals(context.Background(), "")
		if err != nil {
			b.Log.Warn("relay counters of earlier launches", "err", err)
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		for id, t := range totals {
			if b.stats[id] == nil {
				st := relayStats(t)
				b.stats[id] = &st
			}
		}
	})
}

func relayStats(t store.RelayTotals) api.RelayStats {
	return api.RelayStats{Requests: t.Requests, LastStatus: t.LastStatus, Canceled: t.Canceled, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens}
}

// storeSessions persists session records (hashes only) in the store.
type storeSessions struct{ st *store.Store }

func (p storeSessions) SaveSession(ctx context.Context, r session.Record) error {
	return p.st.SaveSession(ctx, storeSession(r))
}

func storeSession(r session.Record) store.Session {
	return store.Session{ID: r.ID, Hash: r.Hash, ClientID: r.ClientID, LaunchID: r.LaunchID,
		Kind: string(r.Kind), State: string(r.State), Created: r.Created, LastUsed: r.LastUsed, Ended: r.Ended}
}

// launchSessions returns the record of the pairing session the relay broker created for
// launch id, which the launch's record saves (store.CreateLaunch); none without a relay or a
// session.
func (d *Daemon) launchSessions(id string) []store.Session {
	if d.relay == nil {
		return nil
	}
	s := d.relay.session(id)
	if s == nil {
		return nil
	}
	return []store.Session{storeSession(s.Record())}
}

func (p storeSessions) DeleteSession(ctx context.Context, id string) error {
	return p.st.DeleteSession(ctx, id)
}

func (p storeSessions) LoadSessions(ctx context.Context) ([]session.Record, error) {
	rows, err := p.st.LoadSessions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]session.Record, 0, len(rows))
	for _, r := range rows {
		out = append(out, session.Record{ID: r.ID, Hash: r.Hash, ClientID: r.ClientID, LaunchID: r.LaunchID,
			Kind: session.Kind(r.Kind), State: session.State(r.State), Created: r.Created, LastUsed: r.LastUsed, Ended: r.Ended})
	}
	return out, nil
}

// relayActivity returns the relay counters of the running launches.
func (d *Daemon) relayActivity() map[string]*api.RelayStats {
	if d.relay == nil {
		return nil
	}
	d.mu.Lock()
	ids := make([]string, 0, len(d.launches))
	for id := range d.launches {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	out := map[string]*api.RelayStats{}
	for _, id := range ids {
		if st := d.relay.launchStats(id); st != nil {
			out[id] = st
		}
	}
	return out
}

// liveSessions counts the live pairing sessions.
func (d *Daemon) liveSessions() int {
	if d.sessions == nil {
		return 0
	}
	return d.sessions.Len()
}
