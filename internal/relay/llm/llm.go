// Package llm is the relay's LLM broker: a reverse proxy for /sandbox/<provider>/… (anthropic,
// openai, gemini) that serves only requests the relay router has paired with a live session,
// forwards only each provider's inference endpoints and gateway.<provider>.allow (Endpoint,
// DefaultEndpoints: the rest of the API is refused with gateway_path_refused), reads each
// request body whole and refuses a model call declaring a server-side tool the provider would
// run itself (web fetch and search, MCP servers, code execution) beyond DefaultServerTools and
// gateway.<provider>.serverTools with gateway_tool_refused, strips every
// credential the box sends (headers, and the key= and access_token= query parameters Google's
// APIs read), attaches the gateway credential host-side, streams server-sent events without
// buffering, turns a revocation mid-stream into an in-stream error event, and reports token
// usage into the request's access record.
package llm

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
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// Providers, the first path segment after /sandbox/.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Gemini    = "gemini"
)

// Default gateway URLs, used when Gateway.URL is empty.
const (
	DefaultAnthropicURL = "https://api.anthropic.com"
	DefaultOpenAIURL    = "https://api.openai.com"
	DefaultGeminiURL    = "https://generativelanguage.googleapis.com"
)

// Gateway is one provider's upstream (gateway.<provider>).
type Gateway struct {
	// URL is the base URL requests are forwarded to (gateway.<provider>.url): the path after
	// /sandbox/<provider> is appended to it. Zero means the provider's public API
	// (DefaultAnthropicURL, DefaultOpenAIURL, DefaultGeminiURL).
	URL string
	// Credential is where the daemon finds the credential it attaches. The zero Credential
	// has none: requests are refused with 401 gateway_credential_missing.
	Credential Credential
	// Allow are requests forwarded besides DefaultEndpoints (gateway.<provider>.allow), each
	// "METHOD /path" with * for any run of characters but "/" (ParseEndpoint).
	Allow []string
	// ServerTools are the server-side tools (run by the provider: web search, URL fetching,
	// MCP servers, code execution) a model call may declare besides DefaultServerTools
	// (gateway.<provider>.serverTools), each named as the provider spells its type without
	// the version date (ParseServerTool). Nil allows none: a request declaring another is
	// refused with 403 gateway_tool_refused.
	ServerTools []string
}

// Config configures a Relay. Its zero value is usable: every provider at its public API, with
// no credential until one is configured.
type Config struct {
	// Anthropic is gateway.anthropic.
	Anthropic Gateway
	// OpenAI is gateway.openai.
	OpenAI Gateway
	// Gemini is gateway.gemini.
	Gemini Gateway
	// Transport carries requests upstream. Nil means a clone of http.DefaultTransport.
	Transport http.RoundTripper
	// Now returns the current time, for credential.ttl. Nil means time.Now.
	Now func() time.Time
}

// Relay serves /sandbox/<provider>/… behind a relay.Handler, which authenticates the pairing
// and puts the session in the request's context. A request without a live session there is
// refused with 403 pairing_invalid, so the Relay fails closed when mounted elsewhere.
type Relay struct {
	gateways map[string]*gateway
}

var _ http.Handler = (*Relay)(nil)

type gateway struct {
	name   string
	url    *url.URL
	header string // canonical header name carrying the credential
	prefix string // value prefix, "Bearer " or ""
	src    *relay.CredentialSource
	proxy  *httputil.ReverseProxy
	// endpoints are the requests forwarded: DefaultEndpoints and gateway.<provider>.allow.
	endpoints []Endpoint
	// serverTools are the server-side tools a request may declare: DefaultServerTools and
	// gateway.<provider>.serverTools.
	serverTools map[string]bool
	// revoked ends a stream whose session was revoked or ended, in the provider's terms.
	revoked string
}

// New returns a Relay for cfg, or an error naming the config key that is invalid.
func New(cfg Config) (*Relay, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	tr := cfg.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		// Whatever the upstream has sent is read in one go, and a request's headers and
		// (small) body leave in one write.
		t.ReadBufferSize, t.WriteBufferSize = relay.CopyBufferSize, relay.CopyBufferSize
		tr = t
	}
	rl := &Relay{gateways: map[string]*gateway{}}
	for _, p := range []struct {
		name, defURL, defHeader string
		gw                      Gateway
	}{
		{Anthropic, DefaultAnthropicURL, "x-api-key", cfg.Anthropic},
		{OpenAI, DefaultOpenAIURL, "Authorization: Bearer", cfg.OpenAI},
		{Gemini, DefaultGeminiURL, "x-goog-api-key", cfg.Gemini},
	} {
		g, err := newGateway(p.name, p.defURL, p.defHeader, p.gw, cfg.Now, tr)
		if err != nil {
			return nil, err
		}
		rl.gateways[p.name] = g
	}
	return rl, nil
}

func newGateway(name, defURL, defHeader string, gw Gateway, now func() time.Time, tr http.RoundTripper) (*gateway, error) {
	key := "gateway." + name
	raw := gw.URL
	if raw == "" {
		raw = defURL
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s.url: %v", key, err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return nil, fmt.Errorf("%s.url %q: want an http or https URL with a host", key, raw)
	case u.User != nil:
		return nil, fmt.Errorf("%s.url: credentials in the URL are refused; use %s.credential", key, key)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%s.url %q: a query or fragment is not allowed", key, raw)
	}
	c := gw.Credential
	if c.File != "" && len(c.Command) > 0 {
		return nil, fmt.Errorf("%s.credential: set one of file and command, not both", key)
	}
	if len(c.Command) > 0 && c.Command[0] == "" {
		return nil, fmt.Errorf("%s.credential.command: empty program name", key)
	}
	h := c.Header
	if h == "" {
		h = defHeader
	}
	name2, prefix, err := parseHeader(h)
	if err != nil {
		return nil, fmt.Errorf("%s.credential.header: %v", key, err)
	}
	allow := make([]Endpoint, 0, len(gw.Allow))
	for i, a := range gw.Allow {
		e, err := ParseEndpoint(a)
		if err != nil {
			return nil, fmt.Errorf("%s.allow[%d]: %v", key, i, err)
		}
		allow = append(allow, e)
	}
	tools := map[string]bool{}
	for _, t := range DefaultServerTools[name] {
		tools[t] = true
	}
	for i, t := range gw.ServerTools {
		if err := ParseServerTool(t); err != nil {
			return nil, fmt.Errorf("%s.serverTools[%d]: %v", key, i, err)
		}
		tools[t] = true
	}
	g := &gateway{
		serverTools: tools,
		endpoints:   append(append([]Endpoint(nil), DefaultEndpoints[name]...), allow...),
		name:        name,
		url:         u,
		header:      http.CanonicalHeaderKey(name2),
		prefix:      prefix,
		src:         newSource(key, c, now),
		revoked:     revokedEvent,
	}
	if name == Gemini {
		g.revoked = geminiRevokedEvent
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   g.errorHandler,
		Transport:      tr,
		// Zero: an event stream (text/event-stream) and a body of unknown length are flushed
		// after every write all the same (ReverseProxy does so whatever FlushInterval says);
		// a body of known length, a non-streaming answer, leaves with its headers in one write
		// instead of headers first.
		FlushInterval: 0,
		BufferPool:    relay.CopyBuffers,
		// Failures are in the access record; the proxy's own lines would say less.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	return g, nil
}

// reqState carries one request's decisions from ServeHTTP into the proxy's hooks.
type reqState struct {
	sess    *session.Session
	rec     *relay.Record
	cred    string
	rest    string
	rawRest string
	body    []byte // the request body when read whole (readBody), else nil
}

type stateKey struct{}

// SplitPath splits /sandbox/<provider>/<rest> into the provider and the rest ("" or starting
// with "/"). ok is false when p does not start with /sandbox/ and a provider name.
func SplitPath(p string) (provider, rest string, ok bool) {
	tail, found := strings.CutPrefix(p, "/sandbox/")
	if !found {
		return "", "", false
	}
	provider, rest, _ = strings.Cut(tail, "/")
	if provider == "" {
		return "", "", false
	}
	if len(rest) > 0 || strings.HasSuffix(tail, "/") {
		rest = "/" + rest
	}
	return provider, rest, true
}

// checkRest refuses a provider path (the decoded rest of SplitPath) the gateway could read as
// another one: a dot segment or an empty element (a trailing slash aside) could leave the
// gateway's base path once the gateway normalises, and an element still holding "%" would be
// decoded a second time there (%252e%252e is a dot segment after two decodings); "#" and "?"
// cannot come from a real API path either.
func checkRest(rest string) error {
	if rest == "" {
		return nil
	}
	elems := strings.Split(strings.TrimSuffix(rest[1:], "/"), "/")
	for _, el := range elems {
		switch {
		case el == "" && len(elems) > 1:
			return errors.New("empty path element (doubled slash)")
		case el == "." || el == "..":
			return fmt.Errorf("dot segment %q", el)
		case strings.ContainsAny(el, "%#?\\") || strings.ContainsFunc(el, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return fmt.Errorf("path element %q has %%, #, ?, a backslash or a control character (it would be decoded or cut again upstream)", el)
		}
	}
	return nil
}

// clientCredentialHeaders are removed from every request before it leaves: whatever the box
// sends there is at most a pairing, and the upstream gets the daemon's credential only.
var clientCredentialHeaders = []string{
	"Authorization",
	"X-Api-Key",
	"X-Goog-Api-Key",
	"Proxy-Authorization",
	"Cookie",
	session.HeaderName,
}

// StripCredentials removes every client credential header from h, whatever the spelling of
// its name.
func StripCredentials(h http.Header) {
	for k := range h {
		for _, c := range clientCredentialHeaders {
			if strings.EqualFold(k, c) {
				delete(h, k)
				break
			}
		}
	}
}

// ServeHTTP implements http.Handler.
func (rl *Relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s := session.FromContext(ctx)
	if s == nil || s.Context().Err() != nil {
		relay.WriteError(w, r, http.StatusForbidden, api.CodePairingInvalid,
			"the relay refused this request: no live pairing for this channel (the session ended or was revoked)")
		return
	}
	if r.Method == http.MethodConnect || (r.RequestURI != "" && !strings.HasPrefix(r.RequestURI, "/")) {
		relay.WriteError(w, r, http.StatusForbidden, api.CodeEgressNotSupported,
			"the relay is not a proxy: CONNECT and absolute-form requests are refused")
		return
	}
	rec := relay.RecordFrom(ctx)
	if rec == nil {
		rec = &relay.Record{}
	}
	provider, rest, ok := SplitPath(r.URL.Path)
	g := rl.gateways[provider]
	if !ok || g == nil {
		relay.WriteError(w, r, http.StatusNotFound, api.CodeNotFound,
			fmt.Sprintf("no LLM provider at %q: use /sandbox/anthropic/…, /sandbox/openai/… or /sandbox/gemini/…", r.URL.Path))
		return
	}
	rec.Provider = provider
	if err := checkRest(rest); err != nil {
		relay.WriteError(w, r, http.StatusBadRequest, api.CodeBadRequest,
			fmt.Sprintf("the relay refused the path %q: %v", r.URL.EscapedPath(), err))
		return
	}
	if !g.allowed(r.Method, rest) {
		relay.WriteError(w, r, http.StatusForbidden, api.CodeGatewayPathRefused,
			fmt.Sprintf("the relay forwards model calls only, not %s %s to the %s gateway (it would carry your credential there); to allow it, add %q to gateway.%s.allow in the agentbox config on the host",
				r.Method, rest, provider, r.Method+" "+rest, provider))
		return
	}
	var body []byte
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
			relay.WriteError(w, r, http.StatusUnsupportedMediaType, api.CodeBadRequest,
				fmt.Sprintf("agentbox's relay reads each request body to check the tools it declares, and does not decode Content-Encoding %q: send the body uncompressed", ce))
			return
		}
		var err error
		body, err = readBody(w, r)
		switch {
		case err != nil && s.Context().Err() != nil:
			rec.Outcome = relay.OutcomeCanceled
			relay.WriteError(w, r, http.StatusForbidden, api.CodePairingInvalid,
				"the relay cancelled this request: its session ended or was revoked")
			return
		case err != nil && ctx.Err() != nil:
			rec.Outcome = relay.OutcomeCanceled // the client went away; nobody to answer
			return
		case errors.Is(err, errBodyTooLarge):
			relay.WriteError(w, r, http.StatusRequestEntityTooLarge, api.CodeBadRequest,
				fmt.Sprintf("agentbox's relay refused the request: its body is larger than %d MiB, more than it reads to check the tools a model call declares", maxBody>>20))
			return
		case err != nil:
			relay.WriteError(w, r, http.StatusBadRequest, api.CodeBadRequest,
				fmt.Sprintf("the relay could not read the request body: %v", err))
			return
		}
		if status, code, msg := g.checkTools(r.Method, rest, body); status != 0 {
			relay.WriteError(w, r, status, code, msg)
			return
		}
	}
	cred, err := g.src.Get(ctx)
	if err != nil {
		detail := err.Error()
		var ce *relay.CredentialError
		if errors.As(err, &ce) {
			detail = ce.Detail
		}
		relay.WriteError(w, r, http.StatusUnauthorized, api.CodeGatewayCredentialMissing,
			fmt.Sprintf("the daemon has no usable %s gateway credential: %s; fix it on the host (the box needs no change, it holds no credential)",
				provider, detail))
		return
	}
	st := &reqState{sess: s, rec: rec, cred: cred, rest: rest}
	if ep, prefix := r.URL.EscapedPath(), "/sandbox/"+provider; strings.HasPrefix(ep, prefix) {
		st.rawRest = ep[len(prefix):]
	}
	st.body = body
	r = r.WithContext(context.WithValue(ctx, stateKey{}, st))
	g.proxy.ServeHTTP(w, r)
}

// checkTools answers a request whose body declares a server-side tool g does not allow with
// 403 and what to do, and a body the check cannot read with 400; a zero status forwards it. Bodies of
// the built-in endpoints must be JSON objects (every model call's is); those of endpoints the
// user added with gateway.<provider>.allow (an upload, say) are checked when they are JSON.
func (g *gateway) checkTools(method, rest string, body []byte) (status int, code, msg string) {
	tools, err := serverTools(g.name, body)
	if errors.Is(err, errBody) && !slices.ContainsFunc(DefaultEndpoints[g.name], func(e Endpoint) bool { return e.matches(method, rest) }) {
		return 0, "", ""
	}
	if err != nil {
		return http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("agentbox's relay could not read the tools of this %s request (it checks them before the request leaves): %v", g.name, err)
	}
	for _, t := range tools {
		if g.serverTools[t] {
			continue
		}
		return http.StatusForbidden, api.CodeGatewayToolRefused, fmt.Sprintf("agentbox's relay refused this model call: it declares the %s server-side tool %q, which the provider runs itself — it can fetch any URL or call any server, beyond the hosts egressAllow lists, with what the box put in the prompt; to allow it, add %q to gateway.%s.serverTools in the agentbox config on the host",
			g.name, t, t, g.name)
	}
	return 0, "", ""
}

// maxBody bounds the request bodies the relay reads, whole, before the request goes upstream:
// the relay reads them to check the tools a model call declares (checkTools), and a body read
// whole leaves with its headers in one write. It is the largest request Anthropic's Messages
// API takes (32 MB); a larger one is refused.
const maxBody = 32 << 20

// errBodyTooLarge is a request body larger than maxBody.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads r's body whole, up to maxBody. Revoking or ending the session, which cancels
// r's context, interrupts the read.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > maxBody {
		return nil, errBodyTooLarge
	}
	rc := http.NewResponseController(w)
	stop := context.AfterFunc(r.Context(), func() { rc.SetReadDeadline(time.Unix(1, 0)) })
	var b []byte
	var err error
	if r.ContentLength > 0 {
		b = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, b)
	} else {
		b, err = io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err == nil && len(b) > maxBody {
			err = errBodyTooLarge
		}
	}
	if !stop() {
		// The deadline may have been set: the request is over, and so is what the server
		// would read next on this connection (it sets a new deadline for the next request).
		return nil, context.Cause(r.Context())
	}
	return b, err
}

func (g *gateway) rewrite(pr *httputil.ProxyRequest) {
	st := pr.In.Context().Value(stateKey{}).(*reqState)
	pr.Out.URL.Path, pr.Out.URL.RawPath = st.rest, st.rawRest
	pr.SetURL(g.url)
	StripCredentials(pr.Out.Header)
	pr.Out.URL.RawQuery = StripQueryCredentials(pr.Out.URL.RawQuery)
	// The transport then asks for gzip itself and decompresses, so that usage can be read;
	// the box's side of the relay is local.
	pr.Out.Header.Del("Accept-Encoding")
	pr.Out.Header.Set(g.header, g.prefix+st.cred)
	if st.body != nil {
		// The body read whole (readBody), as a reader the transport knows is in memory: the
		// request then leaves in one write. (ReverseProxy hands on the inbound body wrapped in
		// a type of its own, which the transport would take for a body that may block.) It
		// can be sent again, should the transport retry on another connection.
		pr.Out.Body = io.NopCloser(bytes.NewReader(st.body))
		pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(st.body)), nil }
	}
}

func (g *gateway) modifyResponse(resp *http.Response) error {
	st := resp.Request.Context().Value(stateKey{}).(*reqState)
	if resp.StatusCode == http.StatusUnauthorized || (g.name == Gemini && resp.StatusCode == http.StatusBadRequest && apiKeyInvalid(resp)) {
		// Never the upstream's words: the box must learn what to do, not what was sent.
		g.src.Invalidate()
		resp.Body.Close()
		body := relay.ErrorJSON(api.CodeGatewayCredentialRejected, fmt.Sprintf(
			"the %s gateway (%s) refused the credential the daemon attached from %s: on the host, renew or replace that credential, then retry (the box needs no change, it holds no credential)",
			g.name, g.url.Redacted(), g.src.Describe()))
		st.rec.Code = api.CodeGatewayCredentialRejected
		resp.Header = http.Header{
			"Content-Type":   {"application/json"},
			"Content-Length": {strconv.Itoa(len(body))},
		}
		resp.Trailer = nil
		resp.StatusCode, resp.Status = http.StatusUnauthorized, "401 Unauthorized" // Gemini's was a 400
		resp.ContentLength = int64(len(body))
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return nil
	}
	ob := &observedBody{rc: resp.Body, st: st, revoked: g.revoked}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case mt == "text/event-stream":
		ob.sse = &sseScanner{usage: &st.rec.Usage}
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		ob.json = new(bytes.Buffer)
	}
	resp.Body = ob
	return nil
}

func (g *gateway) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	st := r.Context().Value(stateKey{}).(*reqState)
	switch {
	case st.sess.Context().Err() != nil:
		st.rec.Outcome = relay.OutcomeCanceled
		relay.WriteError(w, r, http.StatusForbidden, api.CodePairingInvalid,
			"the relay cancelled this request: its session ended or was revoked")
	case r.Context().Err() != nil:
		st.rec.Outcome = relay.OutcomeCanceled // the client went away; nobody to answer
	default:
		relay.WriteError(w, r, http.StatusBadGateway, api.CodeGatewayUnreachable,
			fmt.Sprintf("the %s gateway %s (gateway.%s.url) did not answer: %v", g.name, g.url.Redacted(), g.name, err))
	}
}

// revokedEvent ends a stream whose session was revoked or ended. The event name and the
// error object are those of Anthropic's stream errors; OpenAI clients read data.error.
var revokedEvent = "event: error\ndata: " + string(relay.ErrorJSON(api.CodePairingInvalid,
	"the relay cancelled this stream: its session ended or was revoked")) + "\n\n"

// observedBody passes the upstream's response through while reading token usage from it, and
// ends an event stream with the gateway's revoked event when the session stops being live.
type observedBody struct {
	rc      io.ReadCloser
	st      *reqState
	sse     *sseScanner   // event streams
	json    *bytes.Buffer // JSON bodies, parsed at the end
	revoked string        // the gateway's revoked event
	tail    string        // the rest of revoked still to send
	done    bool
}

func (b *observedBody) Read(p []byte) (int, error) {
	if b.tail != "" {
		n := copy(p, b.tail)
		b.tail = b.tail[n:]
		b.done = b.tail == ""
		return n, nil
	}
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if n > 0 {
		switch {
		case b.sse != nil:
			b.sse.write(p[:n])
		case b.json != nil && b.json.Len()+n <= maxJSONBody:
			b.json.Write(p[:n])
		case b.json != nil:
			b.json = nil
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		if b.json != nil {
			mergeUsage(&b.st.rec.Usage, b.json.Bytes())
		}
	case b.sse != nil && b.st.sess.Context().Err() != nil:
		b.st.rec.Outcome = relay.OutcomeCanceled
		b.st.rec.Code = api.CodePairingInvalid
		b.tail = b.sse.separator() + b.revoked
		return n, nil
	}
	return n, err
}

func (b *observedBody) Close() error { return b.rc.Close() }
