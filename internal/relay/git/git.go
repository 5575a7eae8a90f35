// Package git is the relay's git broker: a smart-HTTP reverse proxy for
// /git/<host[:port]>/<path> that serves only requests paired with a live session, admits the
// remotes of git.allow, refuses a push outside git.pushAllow with git's own pkt-line ERR
// before any pack is sent, attaches static credentials host-side, follows redirects itself
// (three hops within the same allow entry), optionally chains the upstream leg through an L7
// egress endpoint, and cancels transfers when the session is revoked. It also generates the
// per-launch gitconfig that points the box's git at the relay, and holds a pkt-line codec.
package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/recordlimit"
	"github.com/agentbox/agentbox/internal/relay"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// Services of git's smart HTTP protocol.
const (
	UploadPack  = "git-upload-pack"  // fetch, clone, pull, ls-remote
	ReceivePack = "git-receive-pack" // push
)

// PathPrefix is the relay path the git relay serves.
const PathPrefix = "/git/"

// sshPrefix is the relay path the generated gitconfig maps ssh-form remotes to when no ssh
// broker serves their host: a host segment cannot start with ".", so the relay knows them and
// refuses them with a message saying what to do.
const sshPrefix = PathPrefix + ".ssh/"

// Decision is what the relay did with a request.
type Decision string

const (
	DecisionAllow    Decision = "allow"    // forwarded to the remote
	DecisionUpstream Decision = "upstream" // forwarded through git.egressUpstream
	DecisionRefuse   Decision = "refuse"   // refused by the relay
)

// Event is the git relay's record of one request: one log line and one audit record each.
type Event struct {
	Time      time.Time     `json:"time"`
	SessionID string        `json:"sessionId,omitempty"`
	LaunchID  string        `json:"launchId,omitempty"`
	Method    string        `json:"method"`
	Host      string        `json:"host,omitempty"`    // the remote's host[:port], lowercase
	Path      string        `json:"path,omitempty"`    // the repository path on the remote
	Service   string        `json:"service,omitempty"` // git-upload-pack or git-receive-pack
	Decision  Decision      `json:"decision"`
	Code      string        `json:"code,omitempty"` // the refusal code, when there is one
	Status    int           `json:"status"`         // 0 when nothing was answered
	Hops      int           `json:"hops,omitempty"` // redirects followed
	BytesIn   int64         `json:"bytesIn"`
	BytesOut  int64         `json:"bytesOut"`
	Duration  time.Duration `json:"duration"`
	Outcome   relay.Outcome `json:"outcome"`
	// Count is 0 for the Event of one request. A summary of the Events a rate limit held back
	// (internal/recordlimit) has the number of them, with their bytes summed, the last one's
	// status, and Time the first one's.
	Count int64 `json:"count,omitempty"`
	// Repos counts a summary's requests by repository (host and path, in
	// recordlimit.TallyNames counters), so that it still says which remotes they were for;
	// empty in the Event of one request. Its JSON is the sketch's whole state, for the
	// journal of held records; the audit row shows its top.
	Repos recordlimit.Tally `json:"repos,omitzero"`
}

// Merge adds ev to sum, the summary of the Events of one decision, service, outcome and code
// held back by a rate limit (internal/recordlimit).
func Merge(sum, ev *Event) {
	if sum.Count == 0 {
		*sum = Event{Time: ev.Time, LaunchID: ev.LaunchID, Method: "-", Service: ev.Service, Decision: ev.Decision,
			Code: ev.Code, Outcome: ev.Outcome}
	}
	sum.Count++
	sum.Repos.Add(ev.Host + "/" + strings.TrimPrefix(ev.Path, "/"))
	sum.Status = ev.Status
	sum.BytesIn += ev.BytesIn
	sum.BytesOut += ev.BytesOut
	sum.Duration = ev.Time.Add(ev.Duration).Sub(sum.Time)
}

// LimitKey is the key of ev's summary in a rate limit: its decision, service, outcome and code.
func LimitKey(ev *Event) string {
	return string(ev.Decision) + " " + ev.Service + " " + string(ev.Outcome) + " " + ev.Code
}

// Options are the parts of a Relay that do not come from the configuration file. The zero
// value is usable.
type Options struct {
	// Transport carries upstream requests (to remotes or to the egress endpoint). Nil means a
	// clone of http.DefaultTransport.
	Transport http.RoundTripper
	// Logf writes the log line of every request. Nil means log.Printf.
	Logf func(format string, args ...any)
	// Audit receives the Event of every request after its response ended. Nil records
	// nothing.
	Audit func(Event)
	// Limit, when set, is given every request's Event before it is written, and reports
	// whether it is: false holds back its log line and its Audit (the daemon's per-launch
	// record budget, internal/recordlimit, which counts it and writes a summary). Nil writes
	// every Event.
	Limit func(*Event) bool
}

// Relay serves /git/<host[:port]>/<path> behind a relay.Handler, which authenticates the
// pairing and puts the session in the request's context. A request without a live session
// there is refused with 403 pairing_invalid, so a Relay mounted anywhere else fails closed.
type Relay struct {
	pol   *policy
	opt   Options
	base  http.RoundTripper
	proxy *httputil.ReverseProxy

	mu    sync.Mutex
	bases map[string]*url.URL // session id + original repository URL → redirected one (no query)
}

var _ http.Handler = (*Relay)(nil)

// maxBases bounds the remembered redirects; past it they are forgotten all at once.
const maxBases = 4096

// New returns a Relay for cfg, or the error of cfg.Validate.
func New(cfg Config, opt Options) (*Relay, error) {
	pol, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	rl := &Relay{pol: pol, opt: opt, bases: map[string]*url.URL{}}
	rl.base = opt.Transport
	if rl.base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		t.ReadBufferSize, t.WriteBufferSize = relay.CopyBufferSize, relay.CopyBufferSize
		rl.base = t
	}
	rl.proxy = &httputil.ReverseProxy{
		Rewrite:        rl.rewrite,
		Transport:      &upstream{rl: rl},
		ModifyResponse: rl.modifyResponse,
		ErrorHandler:   rl.errorHandler,
		// Flush every write: progress lines and small negotiation answers reach git at once,
		// and the copy buffer keeps big packs at up to 64 KiB per write.
		FlushInterval: -1,
		BufferPool:    relay.CopyBuffers,
		// Failures are in the access record; the proxy's own lines would say less.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	return rl, nil
}

// reqState carries one request's decisions from ServeHTTP into the proxy's hooks.
type reqState struct {
	sess     *session.Session
	ev       *Event
	infoRefs bool   // GET …/info/refs?service=…; else a POST to the service
	service  string // UploadPack or ReceivePack
	suffix   string // "/info/refs" or "/<service>"
	query    string // the canonical query of info/refs, else ""
	entry    *entry // the allow entry the request lies under
	push     *entry // the pushAllow entry, for ReceivePack
	origBase string // scheme://host[:port]/repo as the box asked
	target   *url.URL
	body     []byte // the whole request body when it is small enough to replay
	replay   bool   // body holds the whole request body
	hasBody  bool
	hops     int
	cred     *credEntry // the credential attached to the last attempt
}

type stateKey struct{}

func stateOf(ctx context.Context) *reqState { return ctx.Value(stateKey{}).(*reqState) }

// maxReplay bounds the request bodies the relay keeps to replay after a redirect or a 503:
// git's negotiation requests are smaller, and a pack bigger than git's http.postBuffer comes
// chunked and is streamed, never kept.
const maxReplay = 1 << 20

// ServeHTTP implements http.Handler.
func (rl *Relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ev := &Event{Time: start, Method: r.Method, Decision: DecisionRefuse}
	cw := &relay.CountingWriter{ResponseWriter: w}
	var body *relay.CountingBody
	st := &reqState{ev: ev}
	completed := false // the handler returned: a panic (an aborted copy) leaves it false
	defer func() {
		ev.Duration = time.Since(start)
		ev.Status = cw.Status
		ev.BytesOut = cw.N
		if body != nil {
			ev.BytesIn = body.N.Load()
		}
		if ev.Outcome == "" {
			switch {
			case !completed && (r.Context().Err() != nil || (st.sess != nil && st.sess.Context().Err() != nil)):
				ev.Outcome = relay.OutcomeCanceled
			case cw.Status == 0 || cw.Status >= 400 || ev.Code != "":
				ev.Outcome = relay.OutcomeError
			default:
				ev.Outcome = relay.OutcomeOK
			}
		}
		rl.emit(ev)
	}()

	// The pairing first: an unpaired request learns nothing.
	s := session.FromContext(r.Context())
	if s == nil || s.Context().Err() != nil {
		if s != nil {
			st.sess = s
		}
		rl.refuse(cw, r, st, http.StatusForbidden, api.CodePairingInvalid,
			"the relay refused this request: no live pairing for this channel (the session ended or was revoked)")
		return
	}
	st.sess = s
	ev.SessionID, ev.LaunchID = s.ID(), s.LaunchID()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	stop := context.AfterFunc(s.Context(), func() { cancel(context.Cause(s.Context())) })
	defer stop()

	if r.Method == http.MethodConnect || (r.RequestURI != "" && !strings.HasPrefix(r.RequestURI, "/")) || r.URL.IsAbs() {
		rl.refuse(cw, r, st, http.StatusForbidden, api.CodeEgressNotSupported,
			"the relay is not a proxy: CONNECT and absolute-form requests are refused")
		return
	}
	if !rl.classify(cw, r, st) {
		return
	}
	if r.Body != nil && r.Body != http.NoBody {
		body = &relay.CountingBody{ReadCloser: r.Body}
		r.Body = body
		st.hasBody = true
		if r.ContentLength >= 0 && r.ContentLength <= maxReplay {
			b, err := io.ReadAll(io.LimitReader(body, r.ContentLength+1))
			if err != nil || int64(len(b)) != r.ContentLength {
				ev.Outcome = relay.OutcomeCanceled
				if ctx.Err() == nil {
					ev.Outcome = relay.OutcomeError
				}
				rl.refuse(cw, r, st, http.StatusBadRequest, api.CodeBadRequest, "the request body ended early")
				return
			}
			st.body, st.replay = b, true
			r.Body = st.replayBody()
		}
	}
	if rl.pol.egress != nil {
		ev.Decision = DecisionUpstream
	} else {
		ev.Decision = DecisionAllow
	}
	rl.proxy.ServeHTTP(cw, r.WithContext(context.WithValue(ctx, stateKey{}, st)))
	completed = true
}

// classify parses the relay path and applies the policy; it answers the request itself and
// returns false when the request goes no further.
func (rl *Relay) classify(w http.ResponseWriter, r *http.Request, st *reqState) bool {
	p := r.URL.Path
	if strings.HasPrefix(p, sshPrefix) {
		host, rest, _ := strings.Cut(strings.TrimPrefix(p, sshPrefix), "/")
		repo := rest
		for _, suf := range []string{"/info/refs", "/" + UploadPack, "/" + ReceivePack} {
			repo = strings.TrimSuffix(repo, suf)
		}
		st.ev.Host, st.ev.Path = host, repo
		if svc := r.URL.Query().Get("service"); strings.HasSuffix(rest, "/info/refs") && (svc == UploadPack || svc == ReceivePack) {
			st.infoRefs, st.service = true, svc
		}
		rl.refuse(w, r, st, http.StatusForbidden, api.CodeGitSSHNotServed, fmt.Sprintf(
			"git over ssh to %s is not available in this box (no ssh broker serves %s); use the https remote https://%s/%s, which the git relay serves when git.allow lists it, or add %s to the ssh broker's hosts",
			host, host, host, repo, host))
		return false
	}
	rest, ok := strings.CutPrefix(p, PathPrefix)
	hostSeg, tail, _ := strings.Cut(rest, "/")
	if !ok || hostSeg == "" {
		rl.refuse(w, r, st, http.StatusBadRequest, api.CodeBadRequest, "the git relay serves /git/<host[:port]>/<repository path>")
		return false
	}
	host, port, err := splitHostPort(hostSeg)
	if err != nil {
		rl.refuse(w, r, st, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("the git relay serves /git/<host[:port]>/<repository path>: %v", err))
		return false
	}
	st.ev.Host = strings.ToLower(hostSeg)

	var repo string
	switch {
	case strings.HasSuffix(tail, "/info/refs"):
		repo, st.infoRefs, st.suffix = strings.TrimSuffix(tail, "/info/refs"), true, "/info/refs"
		svc := r.URL.Query()["service"]
		if len(svc) == 1 && (svc[0] == UploadPack || svc[0] == ReceivePack) {
			st.service = svc[0]
			st.query = "service=" + svc[0]
		}
	case strings.HasSuffix(tail, "/"+UploadPack):
		repo, st.service, st.suffix = strings.TrimSuffix(tail, "/"+UploadPack), UploadPack, "/"+UploadPack
	case strings.HasSuffix(tail, "/"+ReceivePack):
		repo, st.service, st.suffix = strings.TrimSuffix(tail, "/"+ReceivePack), ReceivePack, "/"+ReceivePack
	default:
		repo = tail
	}
	st.ev.Path, st.ev.Service = repo, st.service
	if st.service == "" {
		rl.refuse(w, r, st, http.StatusForbidden, api.CodeGitProtocolRefused, fmt.Sprintf(
			"the git relay speaks git's smart HTTP protocol only (info/refs?service=…, git-upload-pack, git-receive-pack); %q is refused (the dumb protocol and /objects/… are not relayed)", "/"+tail))
		return false
	}
	wantMethod := http.MethodPost
	if st.infoRefs {
		wantMethod = http.MethodGet
	}
	if r.Method != wantMethod {
		w.Header().Set("Allow", wantMethod)
		rl.refuse(w, r, st, http.StatusMethodNotAllowed, api.CodeGitProtocolRefused, fmt.Sprintf("%s wants %s, not %s", "/"+tail, wantMethod, r.Method))
		return false
	}
	elems, err := splitRepo(repo)
	if err != nil {
		rl.refuse(w, r, st, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("repository path %q: %v", repo, err))
		return false
	}

	st.entry = match(rl.pol.allow, "", host, port, elems)
	if st.entry == nil {
		rl.refuse(w, r, st, http.StatusForbidden, api.CodeGitNotAllowed, fmt.Sprintf(
			"%s/%s is not in git.allow, so the box cannot reach it; to allow it, add %q (or a prefix of it) to git.allow in the agentbox configuration on the host",
			st.ev.Host, repo, st.ev.Host+"/"+repo))
		return false
	}
	if st.service == ReceivePack {
		st.push = match(rl.pol.push, st.entry.scheme, host, port, elems)
		if st.push == nil {
			rl.refuse(w, r, st, http.StatusForbidden, api.CodeGitPushNotAllowed, fmt.Sprintf(
				"pushing to %s/%s is not allowed (not in git.pushAllow); nothing was sent to the remote; to allow it, add %q (or a prefix of it) to git.pushAllow on the host",
				st.ev.Host, repo, st.ev.Host+"/"+repo))
			return false
		}
	}

	// The upstream URL is built from the checked elements as they are: nothing is parsed or
	// decoded a second time, so the remote gets exactly the path the policy matched.
	base := &url.URL{Scheme: st.entry.scheme, Host: joinHostPort(host, portOr(port, st.entry.scheme), st.entry.scheme),
		Path: "/" + strings.Join(elems, "/")}
	st.origBase = base.String()
	if !st.infoRefs {
		// git asked info/refs first; if that was redirected, the service lives there too.
		if b, ok := rl.base4(st.sess.ID(), st.origBase); ok {
			base = b
		}
	}
	st.target = &url.URL{Scheme: base.Scheme, Host: base.Host, Path: base.Path + st.suffix, RawQuery: st.query}
	return true
}

func portOr(port, scheme string) string {
	if port == "" {
		return defaultPort(scheme)
	}
	return port
}

// splitRepo splits a repository path into its elements, refusing empty, "." and ".." ones.
func splitRepo(repo string) ([]string, error) {
	if repo == "" {
		return nil, errors.New("no repository path")
	}
	elems := strings.Split(repo, "/")
	for _, el := range elems {
		if err := checkElem(el); err != nil {
			return nil, err
		}
	}
	return elems, nil
}

func (rl *Relay) base4(sessID, orig string) (*url.URL, bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b, ok := rl.bases[sessID+"\x00"+orig]
	return b, ok
}

// rememberBase notes that the session's repository orig answered from final after redirects,
// so that its service requests go there directly, as git itself would do.
func (rl *Relay) rememberBase(s *session.Session, orig string, final *url.URL) {
	key := s.ID() + "\x00" + orig
	rl.mu.Lock()
	if len(rl.bases) >= maxBases {
		clear(rl.bases)
	}
	_, had := rl.bases[key]
	rl.bases[key] = final
	rl.mu.Unlock()
	if !had {
		context.AfterFunc(s.Context(), func() {
			rl.mu.Lock()
			defer rl.mu.Unlock()
			delete(rl.bases, key)
		})
	}
}

// forwardHeaders are the request headers that reach the remote; everything else the box sends
// (its pairing, cookies, any Authorization) stays behind.
var forwardHeaders = []string{
	"Accept",
	"Accept-Encoding",
	"Accept-Language",
	"Content-Encoding",
	"Content-Type",
	"Git-Protocol",
	"Pragma",
	"User-Agent",
}

func (rl *Relay) rewrite(pr *httputil.ProxyRequest) {
	st := stateOf(pr.In.Context())
	pr.Out.URL.Path, pr.Out.URL.RawPath, pr.Out.URL.RawQuery = st.target.Path, "", st.target.RawQuery
	pr.SetURL(&url.URL{Scheme: st.target.Scheme, Host: st.target.Host})
	h := make(http.Header, len(forwardHeaders))
	for _, k := range forwardHeaders {
		if v := pr.Out.Header.Values(k); len(v) > 0 {
			h[k] = slices.Clone(v)
		}
	}
	pr.Out.Header = h
}

func (rl *Relay) modifyResponse(resp *http.Response) error {
	st := stateOf(resp.Request.Context())
	// The box never authenticates or keeps state with the remote itself.
	resp.Header.Del("Set-Cookie")
	resp.Header.Del("WWW-Authenticate")
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusProxyAuthRequired:
		if st.cred != nil {
			st.cred.src.Invalidate()
			return &refusal{http.StatusForbidden, api.CodeGitCredentialRejected, fmt.Sprintf(
				"%s refused the credential the daemon attached from %s (HTTP %d): renew or replace it on the host (the box holds no credential and needs no change)",
				st.target.Host, st.cred.src.Describe(), resp.StatusCode)}
		}
		return &refusal{http.StatusForbidden, api.CodeGitCredentialMissing, fmt.Sprintf(
			"%s asks for a credential for %s (HTTP %d) and git.credentials has none for it: add one on the host (the box holds no credential and cannot prompt)",
			st.target.Host, st.ev.Path, resp.StatusCode)}
	case isRedirect(resp.StatusCode):
		// The transport follows redirects; one left over has no usable Location.
		return &refusal{http.StatusBadGateway, api.CodeGitRedirectRefused, fmt.Sprintf("%s answered HTTP %d without a usable Location", st.target.Host, resp.StatusCode)}
	case resp.StatusCode == http.StatusOK && st.infoRefs:
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if want := "application/x-" + st.service + "-advertisement"; mt != want {
			return &refusal{http.StatusBadGateway, api.CodeGitProtocolRefused, fmt.Sprintf(
				"%s does not speak git's smart HTTP protocol for %s (it answered Content-Type %q, not %q); the git relay does not relay the dumb protocol",
				st.target.Host, st.ev.Path, mt, want)}
		}
	}
	return nil
}

func (rl *Relay) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	st := stateOf(r.Context())
	var rf *refusal
	switch {
	case st.sess.Context().Err() != nil:
		st.ev.Outcome = relay.OutcomeCanceled
		rl.refuse(w, r, st, http.StatusForbidden, api.CodePairingInvalid,
			"the relay cancelled this transfer: its session ended or was revoked")
	case r.Context().Err() != nil:
		st.ev.Outcome = relay.OutcomeCanceled // the client went away; nobody to answer
	case errors.As(err, &rf):
		if rf.code == api.CodeGitRedirectRefused {
			st.ev.Decision = DecisionRefuse
		}
		rl.refuse(w, r, st, rf.status, rf.code, rf.msg)
	default:
		via := ""
		if rl.pol.egress != nil {
			via = " through git.egressUpstream " + rl.pol.egress.Redacted()
		}
		rl.refuse(w, r, st, http.StatusBadGateway, api.CodeGitRemoteUnreachable, fmt.Sprintf("%s did not answer%s: %v", st.target.Host, via, err))
	}
}

// refuse answers a request the relay does not carry through, in the form git shows: for
// info/refs a 200 ref advertisement carrying "ERR <reason>" (git prints "remote error:
// <reason>" and stops before sending anything), else status with a text/plain reason.
func (rl *Relay) refuse(w http.ResponseWriter, r *http.Request, st *reqState, status int, code, msg string) {
	st.ev.Code = code
	if rec := relay.RecordFrom(r.Context()); rec != nil {
		rec.Code = code
		if rec.Outcome == "" {
			rec.Outcome = relay.OutcomeError
		}
	}
	text := "agentbox: " + msg + " [" + code + "]"
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if st.infoRefs && st.service != "" && code != api.CodePairingInvalid {
		b := errAdvertisement(st.service, text)
		h.Set("Content-Type", "application/x-"+st.service+"-advertisement")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b) // the client may be gone; nothing to do about it
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, text+"\n")
}

func (rl *Relay) emit(ev *Event) {
	if rl.opt.Limit != nil && !rl.opt.Limit(ev) {
		return
	}
	logf := rl.opt.Logf
	if logf == nil {
		logf = log.Printf
	}
	logf("%s", LogLine(ev))
	if rl.opt.Audit != nil {
		rl.opt.Audit(*ev)
	}
}

// LogLine is the log line of ev, as the relay writes it (and the daemon a summary's).
func LogLine(ev *Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "git: launch=%s session=%s %s host=%s path=%q service=%s decision=%s status=%d in=%d out=%d",
		orDash(ev.LaunchID), orDash(ev.SessionID), ev.Method, orDash(ev.Host), ev.Path, orDash(ev.Service),
		ev.Decision, ev.Status, ev.BytesIn, ev.BytesOut)
	if ev.Hops > 0 {
		fmt.Fprintf(&b, " hops=%d", ev.Hops)
	}
	fmt.Fprintf(&b, " dur=%s %s", ev.Duration.Round(time.Microsecond), ev.Outcome)
	if ev.Code != "" {
		fmt.Fprintf(&b, " code=%s", ev.Code)
	}
	if ev.Count > 0 {
		fmt.Fprintf(&b, " count=%d reason=%s repos=%q", ev.Count, relay.ReasonRateLimited, ev.Repos.String())
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// replayBody returns a fresh reader over the kept request body.
func (st *reqState) replayBody() io.ReadCloser { return io.NopCloser(bytes.NewReader(st.body)) }
