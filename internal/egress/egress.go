// Package egress is the allowlist egress proxy of a launch: an HTTP proxy that authenticates
// the launch's pairing before anything else, then carries CONNECT tunnels (opaque, never
// intercepted) and absolute-form http:// requests only to the hosts and ports of an
// allowlist, resolving names host-side and dialling the checked address, never one inside the
// host's loopback, LAN or link-local ranges unless an entry names it. Revoking the pairing
// closes its tunnels. Every tunnel and request is one log line and one Record.
package egress

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/recordlimit"
	"github.com/agentbox/agentbox/internal/relay"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// ConfigKey is the configuration key of the allowlist, named in refusals.
const ConfigKey = "egressAllow"

// DefaultDialTimeout bounds a dial when Proxy.DialTimeout is zero.
const DefaultDialTimeout = 10 * time.Second

// maxDialAttempts bounds the addresses of one name tried in turn.
const maxDialAttempts = 4

// Resolver resolves host names host-side; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Hosts is a Resolver that answers from a map of lower-case names (a test's hosts file); a
// name not in it does not exist.
type Hosts map[string][]netip.Addr

// LookupNetIP returns the addresses of host.
func (h Hosts) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a := h[strings.ToLower(strings.TrimSuffix(host, "."))]; len(a) > 0 {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Proxy is the egress proxy of one launch. Its zero value refuses every request; set Allow
// and Sessions (and Scope, for a launch). Serve it with Serve. Close closes every tunnel.
type Proxy struct {
	// Allow is the allowlist. Nil or empty refuses every target.
	Allow *Allowlist
	// Sessions authenticates pairings. Nil refuses every request with pairing_invalid.
	Sessions *session.Registry
	// Scope narrows the sessions admitted; the daemon sets the launch's id so that only that
	// launch's pairing opens anything on this launch's channel.
	Scope session.Scope
	// Resolver resolves names. Nil means net.DefaultResolver.
	Resolver Resolver
	// Dial dials a checked address ("ip:port"). Nil means a net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// DialTimeout bounds each dial. Zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// Logf writes the line of every tunnel and request. Nil means log.Printf.
	Logf func(format string, args ...any)
	// Audit receives the record of every tunnel and request once it ended. Nil records
	// nothing. It is called from the connection's goroutine.
	Audit func(Record)
	// Records is the launch's record budget (internal/recordlimit), shared with its other
	// brokers: past it a record is counted, not written, and the count is written as a
	// summary Record per decision. Nil means a budget of the proxy's own.
	Records *recordlimit.Budget
	// Journal is the file that keeps the records the rate limit holds back until their
	// summaries are written (recordlimit.Limiter.Journal); ReplayRecords writes those a killed
	// daemon left. Empty means none.
	Journal string
	// Commit returns once the audit records written are durable; the journal of the
	// summaries written is removed after it. Nil means it is not waited for.
	Commit func()

	initOnce sync.Once
	// inflight counts the requests being served, so that Close returns once each has been
	// counted (Stats) and recorded; closing stops counting new ones (they are refused).
	inflightMu sync.RWMutex
	closing    bool
	inflight   sync.WaitGroup
	ctx        context.Context // cancelled by Close
	cancel     context.CancelFunc
	rp         *httputil.ReverseProxy
	stats      statsCounter
	limit      recordlimit.Limiter[Record]
}

func (p *Proxy) init() {
	p.initOnce.Do(func() {
		p.ctx, p.cancel = context.WithCancel(context.Background())
		p.limit.Budget, p.limit.Merge, p.limit.Write = p.Records, mergeRecord, p.write
		p.limit.Journal, p.limit.Commit, p.limit.Logf = p.Journal, p.Commit, p.logf
		p.rp = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				t := pr.In.Context().Value(dialKey{}).(*predialed).target
				pr.SetURL(forwardURL(t))
				pr.Out.Host = pr.In.Host
				pr.Out.Header.Del("Proxy-Authorization")
				pr.Out.Header.Del("Proxy-Connection")
			},
			Transport: &http.Transport{
				// The connection was dialled to the checked address before the request reached
				// the transport; the transport only takes it over, once.
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					if pd, _ := ctx.Value(dialKey{}).(*predialed); pd != nil {
						if c := pd.take(); c != nil {
							return c, nil
						}
					}
					return nil, errors.New("egress: no checked connection for this request")
				},
				DisableKeepAlives:     true,
				ResponseHeaderTimeout: 5 * time.Minute,
				Proxy:                 nil,
			},
			BufferPool: bufferPool{},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				rec := recordFrom(r.Context())
				rec.Reason = ReasonDial
				writeError(w, rec, http.StatusBadGateway, api.CodeUpstreamUnreachable,
					fmt.Sprintf("egress to %s failed: %v", rec.Target, err))
			},
		}
	})
}

// Close closes every open tunnel and cancels every request in flight; later requests are
// refused. It is the end of the launch's proxy: the summaries of the records held back by
// the rate limit are written.
//
// Close waits, at most closeWait, for the requests in flight to end, so that Stats then
// counts every request the proxy took: a tunnel whose client had already closed could be
// counted after the launch's end otherwise, and the launch showed one counter in `agentbox
// launches` and another, from the audit rows, after the daemon's restart.
func (p *Proxy) Close() error {
	p.init()
	p.inflightMu.Lock()
	p.closing = true
	p.inflightMu.Unlock()
	p.cancel()
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
		p.logf("egress: requests still in flight %v after the proxy's end; their counts may come later", closeWait)
	}
	p.limit.Close()
	return nil
}

// closeWait bounds Close's wait for the requests in flight: each ends at the cancellation
// but for a write to a client that does not read.
const closeWait = 2 * time.Second

// track counts a request as in flight unless the proxy is closing; the caller calls the
// function returned when the request has been counted.
func (p *Proxy) track() func() {
	p.inflightMu.RLock()
	defer p.inflightMu.RUnlock()
	if p.closing {
		return func() {}
	}
	p.inflight.Add(1)
	return p.inflight.Done
}

// FlushRecords writes now the summaries of the records the rate limit holds back
// (internal/recordlimit); Close does it too.
func (p *Proxy) FlushRecords() {
	p.init()
	p.limit.Flush()
}

// ReplayRecords writes the summaries of the records held back in the journal (Journal) by a
// proxy whose daemon was killed before it wrote them, and removes it; it returns the number of
// summaries written. Call it before the proxy serves.
func (p *Proxy) ReplayRecords() (int, error) {
	p.init()
	return p.limit.Replay()
}

func (p *Proxy) logf(format string, args ...any) {
	if p.Logf != nil {
		p.Logf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// mergeRecord adds rec to sum, the summary of the records of its decision held back by the
// rate limit.
func mergeRecord(sum, rec *Record) {
	if sum.Count == 0 {
		*sum = Record{Time: rec.Time, LaunchID: rec.LaunchID, Method: "-", Decision: rec.Decision, Reason: ReasonRateLimited}
	}
	sum.Count++
	sum.Targets.Add(orDash(rec.Target))
	sum.BytesUp += rec.BytesUp
	sum.BytesDown += rec.BytesDown
	sum.Duration = rec.Time.Add(rec.Duration).Sub(sum.Time)
}

// Record is the account of one tunnel or request.
type Record struct {
	Time      time.Time
	LaunchID  string // empty when no pairing was accepted
	SessionID string
	Method    string // CONNECT, GET, …
	Target    string // host:port as requested
	Host      string // the host of Target
	Port      int
	// Addr is the address dialled ("ip:port"); empty when none was.
	Addr string
	// Decision is allow (the tunnel or request went through), refuse (auth or allowlist) or
	// error (allowed, but resolving or dialling failed).
	Decision string
	Code     string // the error code answered; empty when allowed
	Reason   string // why refused or failed (Reason* constants), or "" when allowed
	Detail   string // refusal detail (the refused addresses and their class)
	Status   int
	// BytesUp went from the box to the upstream, BytesDown back, bodies and tunnel payload.
	BytesUp   int64
	BytesDown int64
	Duration  time.Duration
	// Outcome is how an allowed tunnel or request ended: done, revoked (the pairing was
	// revoked or ended), closed (the proxy closed) or canceled (the box's side went away).
	Outcome string
	// Count is 0 for the record of one tunnel or request. A summary of the records the rate
	// limit held back (Reason ReasonRateLimited) has the number of them, their decision and
	// their bytes summed; Time is the first one's (internal/recordlimit).
	Count int64
	// Targets counts a summary's requests by target (in recordlimit.TallyNames counters),
	// so that it still says where they went; empty in the record of one request.
	Targets recordlimit.Tally `json:",omitzero"`
}

// Decisions of a Record.
const (
	DecisionAllow  = "allow"
	DecisionRefuse = "refuse"
	DecisionError  = "error"
)

type recordKey struct{}

func recordFrom(ctx context.Context) *Record {
	r, _ := ctx.Value(recordKey{}).(*Record)
	return r
}

// pairingFrom returns the pairings Proxy-Authorization offers: the password of Basic (any
// user name) or the token of Bearer. present reports whether the header was sent at all.
func pairingFrom(h http.Header) (pairings []string, present bool) {
	vals := h.Values("Proxy-Authorization")
	for i, v := range vals {
		if i == 4 {
			break
		}
		scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok {
			continue
		}
		cred = strings.TrimSpace(cred)
		switch {
		case strings.EqualFold(scheme, "Bearer"):
			pairings = append(pairings, cred)
		case strings.EqualFold(scheme, "Basic"):
			b, err := base64.StdEncoding.DecodeString(cred)
			if err != nil {
				continue
			}
			if _, pw, ok := strings.Cut(string(b), ":"); ok {
				pairings = append(pairings, pw)
			}
		}
	}
	return pairings, len(vals) > 0
}

func (p *Proxy) authenticate(r *http.Request) (*session.Session, bool) {
	cands, present := pairingFrom(r.Header)
	if p.Sessions == nil {
		return nil, present
	}
	for _, c := range cands {
		if s, err := p.Sessions.Authenticate(c, p.Scope); err == nil {
			return s, true
		}
	}
	return nil, present
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.init()
	untrack := p.track()
	start := time.Now()
	rec := &Record{Time: start.Round(0), Method: r.Method}
	defer func() {
		rec.Duration = time.Since(start)
		p.emit(rec)
		untrack()
	}()
	r = r.WithContext(context.WithValue(r.Context(), recordKey{}, rec))

	// The pairing first: an unpaired request learns nothing, not even whether its target
	// would be allowed.
	s, present := p.authenticate(r)
	if s == nil || p.ctx.Err() != nil {
		rec.Decision, rec.Reason = DecisionRefuse, ReasonPairing
		status := http.StatusForbidden
		if !present {
			// A challenge, so that clients which send credentials only when asked (libcurl
			// with CURLAUTH_ANY: git) retry with the pairing of their proxy URL.
			w.Header().Set("Proxy-Authenticate", `Basic realm="agentbox"`)
			status = http.StatusProxyAuthRequired
		}
		writeError(w, rec, status, api.CodePairingInvalid,
			"the egress proxy refused this request: no live pairing for this launch (the session ended or was revoked); proxy credentials come from HTTPS_PROXY")
		return
	}
	rec.SessionID, rec.LaunchID = s.ID(), s.LaunchID()

	t, err := requestTarget(r)
	if err != nil {
		rec.Decision, rec.Reason = DecisionRefuse, ReasonBadRequest
		writeError(w, rec, http.StatusBadRequest, api.CodeBadRequest,
			"the egress proxy takes CONNECT host:port and absolute-form http:// requests only: "+err.Error())
		return
	}
	rec.Target, rec.Host, rec.Port = t.String(), t.Host(), int(t.Port)
	if ok, reason := p.Allow.allowsTarget(t); !ok {
		rec.Decision, rec.Reason = DecisionRefuse, reason
		key := ConfigKey
		if isGit(r) {
			key = GitConfigKey
		}
		p.stats.noteRefusal(t.String(), key) // before the answer: the box may end as soon as it has it
		writeError(w, rec, http.StatusForbidden, api.CodeEgressRefused, refusal(t, reason, isGit(r)))
		return
	}

	// Revoking or ending the session, or closing the proxy, cancels the dial and what follows.
	life, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer cancel(nil)
	stop1 := context.AfterFunc(s.Context(), func() { cancel(context.Cause(s.Context())) })
	defer stop1()
	stop2 := context.AfterFunc(p.ctx, func() { cancel(errProxyClosed) })
	defer stop2()
	release := s.Hold()
	defer release()

	dctx, dcancel := context.WithCancel(life)
	stop3 := context.AfterFunc(r.Context(), dcancel)
	up, status, code, msg := p.dialTarget(dctx, t, rec)
	stop3()
	dcancel()
	if up == nil {
		if rec.Decision == "" {
			rec.Decision = DecisionError
		} else if code == api.CodeEgressRefused {
			p.stats.noteRefusal(t.String(), ConfigKey)
		}
		writeError(w, rec, status, code, msg)
		return
	}
	rec.Decision = DecisionAllow
	if r.Method == http.MethodConnect {
		p.tunnel(w, r, up, rec, life)
	} else {
		p.forward(w, r, up, t, rec, life)
	}
	switch cause := context.Cause(life); {
	case cause == nil:
		if rec.Outcome == "" {
			rec.Outcome = "done"
		}
	case errors.Is(cause, session.ErrInvalid):
		rec.Outcome = "revoked"
	case errors.Is(cause, errProxyClosed):
		rec.Outcome = "closed"
	default:
		rec.Outcome = "canceled"
	}
}

var errProxyClosed = errors.New("egress proxy closed")

// requestTarget returns the target of a CONNECT or absolute-form http:// request.
func requestTarget(r *http.Request) (Target, error) {
	if r.Method == http.MethodConnect {
		auth := r.RequestURI
		if auth == "" {
			auth = r.Host
		}
		return ParseTarget(auth)
	}
	if r.URL == nil || !r.URL.IsAbs() || (r.RequestURI != "" && strings.HasPrefix(r.RequestURI, "/")) {
		return Target{}, errors.New("origin-form request (no scheme and host)")
	}
	if r.URL.Scheme != "http" {
		return Target{}, fmt.Errorf("scheme %q (https goes through CONNECT)", r.URL.Scheme)
	}
	if r.URL.User != nil {
		return Target{}, errors.New("user information in the URL")
	}
	return parseTarget(r.URL.Host, 80)
}

// GitConfigKey is the configuration key that lets git in a box reach a remote (through the
// git relay), named in the refusals of git's requests.
const GitConfigKey = "git.allow"

// isGit reports whether r comes from git (its libcurl sends git's User-Agent, also with
// CONNECT): a refused git remote is allowed by git.allow, not by egressAllow.
func isGit(r *http.Request) bool { return strings.HasPrefix(r.UserAgent(), "git/") }

// refusal is the message of an egress_refused answer: what was refused and which entry of
// which key would allow it (git.allow for git's requests).
func refusal(t Target, reason string, git bool) string {
	if git {
		return fmt.Sprintf("agentbox refused egress to %s: git remotes are reached through the git relay, and no entry of %s covers %s. To allow it, add the remote (%q, or a prefix of it) to %s in your agentbox config (docs/git.md)",
			t, GitConfigKey, t.Host(), "https://"+t.Host()+"/OWNER/REPO", GitConfigKey)
	}
	entry := t.Host()
	if t.Addr.Is6() {
		entry = "[" + entry + "]"
	}
	if t.Port != 443 && t.Port != 80 {
		entry += fmt.Sprintf(":%d", t.Port)
	}
	var why string
	switch reason {
	case ReasonPortNotAllowed:
		why = fmt.Sprintf("an entry of %s names %s but not port %d", ConfigKey, t.Host(), t.Port)
	default:
		why = fmt.Sprintf("no entry of %s covers %s", ConfigKey, t.Host())
	}
	msg := fmt.Sprintf("agentbox refused egress to %s: %s. To allow it, add %q to %s in your agentbox config (docs/egress.md)",
		t, why, entry, ConfigKey)
	return msg
}

// dialTarget resolves t (a name) host-side, keeps the addresses the allowlist permits and
// dials them in turn. On failure it returns the answer to give.
func (p *Proxy) dialTarget(ctx context.Context, t Target, rec *Record) (c net.Conn, status int, code, msg string) {
	var addrs []netip.Addr
	if t.Addr.IsValid() {
		addrs = []netip.Addr{t.Addr} // named by an address entry: granted explicitly
	} else {
		res := p.Resolver
		if res == nil {
			res = net.DefaultResolver
		}
		found, err := res.LookupNetIP(ctx, "ip", t.Name)
		if err != nil || len(found) == 0 {
			rec.Reason = ReasonResolve
			return nil, http.StatusBadGateway, api.CodeUpstreamUnreachable, fmt.Sprintf("egress to %s: cannot resolve %s: %v", t, t.Name, err)
		}
		var refused []string
		for _, a := range found {
			a = a.Unmap().WithZone("")
			if cls := classify(a); cls != "" && !p.Allow.grantsAddr(a, t.Port) {
				refused = append(refused, a.String()+" ("+cls+")")
				continue
			}
			addrs = append(addrs, a)
		}
		if len(addrs) == 0 {
			rec.Decision, rec.Reason, rec.Detail = DecisionRefuse, ReasonAddress, strings.Join(refused, ", ")
			return nil, http.StatusForbidden, api.CodeEgressRefused, fmt.Sprintf(
				"egress to %s refused: %s resolves only to addresses outside the public internet (%s); a name does not grant those. If this is intended, add each address as an entry of %s (docs/egress.md)",
				t, t.Name, rec.Detail, ConfigKey)
		}
	}
	dial := p.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	timeout := p.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	var errs []error
	for i, a := range addrs {
		if i == maxDialAttempts {
			break
		}
		ap := netip.AddrPortFrom(a, t.Port).String()
		dctx, cancel := context.WithTimeout(ctx, timeout)
		conn, err := dial(dctx, "tcp", ap)
		cancel()
		if err == nil {
			rec.Addr = ap
			return conn, 0, "", ""
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	rec.Reason = ReasonDial
	if rec.Addr == "" && len(addrs) > 0 {
		rec.Addr = netip.AddrPortFrom(addrs[0], t.Port).String()
	}
	return nil, http.StatusBadGateway, api.CodeUpstreamUnreachable, fmt.Sprintf("egress to %s: %v", t, errors.Join(errs...))
}

// writeError answers an error with the relay's JSON error body and notes it in rec. The
// answer to a refused CONNECT carries the message in its status line too: clients do not show the body
// of a refused tunnel, but several (Go, Python's http.client under pip) show its reason phrase.
func writeError(w http.ResponseWriter, rec *Record, status int, code, message string) {
	rec.Code, rec.Status = code, status
	b := relay.ErrorJSON(code, message)
	if rec.Method == http.MethodConnect && code == api.CodeEgressRefused && writeRaw(w, status, message, b) {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b) // the client may be gone; nothing to do about it
}

// writeRaw writes the answer on the hijacked connection with reason as its reason phrase (net/http
// cannot set one), and closes the connection. It reports false when w cannot be hijacked.
func writeRaw(w http.ResponseWriter, status int, reason string, body []byte) bool {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	defer conn.Close()
	reason = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, reason)
	fmt.Fprintf(brw, "HTTP/1.1 %d %s\r\n", status, reason)
	fmt.Fprintf(brw, "Content-Type: application/json\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(body))
	brw.Write(body)
	brw.Flush() // the client may be gone; nothing to do about it
	return true
}

// emit writes rec, or holds it back (kept in the journal), and then counts it: a count in
// Stats is a record written or journaled.
func (p *Proxy) emit(rec *Record) {
	admit := p.limit.Admit
	if rec.Decision == DecisionAllow {
		admit = p.limit.AdmitAllowed
	}
	if admit(rec.Decision, rec, time.Now()) {
		p.write(rec)
	}
	p.stats.add(rec)
}

// write writes the log line and the audit record of rec.
func (p *Proxy) write(rec *Record) {
	logf := p.logf
	var b strings.Builder
	fmt.Fprintf(&b, "egress: launch=%s session=%s %s %s addr=%s decision=%s status=%d up=%d down=%d dur=%s",
		orDash(rec.LaunchID), orDash(rec.SessionID), rec.Method, orDash(rec.Target), orDash(rec.Addr),
		rec.Decision, rec.Status, rec.BytesUp, rec.BytesDown, rec.Duration.Round(time.Microsecond))
	if rec.Outcome != "" {
		fmt.Fprintf(&b, " outcome=%s", rec.Outcome)
	}
	if rec.Code != "" {
		fmt.Fprintf(&b, " code=%s reason=%s", rec.Code, rec.Reason)
	}
	if rec.Detail != "" {
		fmt.Fprintf(&b, " detail=%q", rec.Detail)
	}
	if rec.Count > 0 {
		fmt.Fprintf(&b, " count=%d targets=%q", rec.Count, rec.Targets.String())
	}
	logf("%s", b.String())
	if p.Audit != nil {
		p.Audit(*rec)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Stats summarizes what a proxy carried and refused since it was made.
type Stats struct {
	Allowed   int64 // tunnels and requests that went through
	Refused   int64 // refused: pairing, allowlist, address or bad request
	Failed    int64 // allowed but not resolvable or not reachable
	BytesUp   int64
	BytesDown int64
	// LastRefused is the target (host:port) of the latest allowlist or address refusal, and
	// LastRefusedReason its reason; empty if none.
	LastRefused       string
	LastRefusedReason string
	// Refusals are the distinct targets the allowlist or the address check refused, first
	// refused first (at most MaxRefusals), with the key that would allow each.
	Refusals []Refusal
}

// Refusal is a target the proxy refused and the configuration key that would allow it.
type Refusal struct {
	Target string // host:port
	Key    string // ConfigKey, or GitConfigKey for git's requests
}

// MaxRefusals bounds Stats.Refusals.
const MaxRefusals = 16

type statsCounter struct {
	allowed, refused, failed, up, down atomic.Int64
	mu                                 sync.Mutex
	lastRefused, lastReason            string
	refusals                           []Refusal
}

// noteRefusal adds target to the distinct refused targets.
func (s *statsCounter) noteRefusal(target, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Refusal{Target: target, Key: key}
	if len(s.refusals) < MaxRefusals && !slices.Contains(s.refusals, r) {
		s.refusals = append(s.refusals, r)
	}
}

func (s *statsCounter) add(rec *Record) {
	switch rec.Decision {
	case DecisionAllow:
		s.allowed.Add(1)
	case DecisionRefuse:
		s.refused.Add(1)
		if rec.Target != "" && rec.Reason != ReasonPairing && rec.Reason != ReasonBadRequest {
			s.mu.Lock()
			s.lastRefused, s.lastReason = rec.Target, rec.Reason
			s.mu.Unlock()
		}
	default:
		s.failed.Add(1)
	}
	s.up.Add(rec.BytesUp)
	s.down.Add(rec.BytesDown)
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	s := &p.stats
	s.mu.Lock()
	last, reason, refusals := s.lastRefused, s.lastReason, slices.Clone(s.refusals)
	s.mu.Unlock()
	return Stats{Allowed: s.allowed.Load(), Refused: s.refused.Load(), Failed: s.failed.Load(),
		BytesUp: s.up.Load(), BytesDown: s.down.Load(), LastRefused: last, LastRefusedReason: reason, Refusals: refusals}
}

// Serve serves h (a Proxy) on ln until ln is closed, and returns nil then. Closing ln stops
// new connections only; Proxy.Close ends the tunnels.
func Serve(ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(discard{}, "", 0),
	}
	err := srv.Serve(ln)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// bufferPool hands ReverseProxy copy buffers larger than its default 32 KiB: fewer
// writes per megabyte of a download.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (bufferPool) Get() []byte  { return *(buffers.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
