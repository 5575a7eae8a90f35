// Package relay is the daemon's relay channel for boxes: an http.Handler that checks the
// session pairing of every request before anything else, refuses CONNECT and absolute-form
// requests (the relay is no forward proxy), routes /sandbox/… to the LLM relay and /git/… to
// the git relay, ties each request to its session so that revocation cancels it, and writes
// one access record per request; and Serve, which serves it on a listener such as a launch's
// unix socket.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/handoff"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// Handler is the relay channel of one launch (Scope.LaunchID set) or the shared host loopback
// listener for `egress: allow` (zero Scope). Its zero value refuses every request.
type Handler struct {
	// Sessions authenticates pairings. Nil refuses every request with pairing_invalid.
	Sessions *session.Registry
	// Scope narrows the sessions admitted: a launch's channel sets LaunchID so that only that
	// launch's pairing is accepted. The zero Scope admits every live session.
	Scope session.Scope
	// Sandbox serves /sandbox/… (the LLM relay). Nil answers 404.
	Sandbox http.Handler
	// Git serves /git/… (the git relay). Nil answers 404.
	Git http.Handler
	// Logf writes the access line of every request. Nil means log.Printf.
	Logf func(format string, args ...any)
	// Audit receives the access record of every request, after the response ended. Nil
	// records nothing.
	Audit func(Record)
	// Limit, when set, is given every request's record before it is written, and reports
	// whether it is: false holds back its access line and its Audit (the daemon's per-launch
	// record budget, internal/recordlimit, which counts it and writes a summary). It may fill
	// in the record (the launch of a channel whose pairing was refused). Nil writes every
	// record.
	Limit func(*Record) bool
}

// maxPairingCandidates bounds the header values tried as pairings.
const maxPairingCandidates = 4

// pairingCandidates returns the values of h that may carry a pairing, in order:
// X-Agentbox-Pairing, x-api-key, x-goog-api-key (where the Google GenAI SDK sends its API key),
// and the token of Authorization: Bearer.
func pairingCandidates(h http.Header) []string {
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); v != "" && len(out) < maxPairingCandidates {
			out = append(out, v)
		}
	}
	for _, v := range h.Values(session.HeaderName) {
		add(v)
	}
	for _, v := range h.Values("X-Api-Key") {
		add(v)
	}
	for _, v := range h.Values("X-Goog-Api-Key") {
		add(v)
	}
	for _, v := range h.Values("Authorization") {
		if scheme, token, ok := strings.Cut(strings.TrimSpace(v), " "); ok && strings.EqualFold(scheme, "Bearer") {
			add(token)
		}
	}
	return out
}

func (h *Handler) authenticate(r *http.Request) *session.Session {
	if h.Sessions == nil {
		return nil
	}
	for _, p := range pairingCandidates(r.Header) {
		if s, err := h.Sessions.Authenticate(p, h.Scope); err == nil {
			return s
		}
	}
	return nil
}

// isAbsoluteForm reports whether r's request target is not origin-form: absolute-form
// (`GET http://host/ HTTP/1.1`), authority-form or `*`.
func isAbsoluteForm(r *http.Request) bool {
	if r.RequestURI != "" {
		return !strings.HasPrefix(r.RequestURI, "/")
	}
	return r.URL.IsAbs() || r.URL.Host != ""
}

// Broker names returned by Route.
const (
	BrokerSandbox = "sandbox"
	BrokerGit     = "git"
)

// Route returns the broker that serves path p ("sandbox" or "git"), or "" if none does. A
// path that is not clean (empty, ".", ".." or doubled slashes inside, control characters)
// has no broker: it could mean something else to the upstream than to the relay.
func Route(p string) string {
	if !cleanPath(p) {
		return ""
	}
	switch {
	case strings.HasPrefix(p, "/sandbox/"):
		return BrokerSandbox
	case strings.HasPrefix(p, "/git/"):
		return BrokerGit
	}
	return ""
}

func cleanPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return false
		}
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		if s == "." || s == ".." || (s == "" && i != len(segs)-1) {
			return false
		}
	}
	return true
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	clientCtx := r.Context()
	rec := &Record{Time: start.Round(0), Method: r.Method, Path: r.URL.Path}
	cw := &CountingWriter{ResponseWriter: w}
	var s *session.Session
	var body *CountingBody
	completed := false
	defer func() {
		rec.Duration = time.Since(start)
		rec.Status = cw.Status
		rec.BytesOut = cw.N
		if body != nil {
			rec.BytesIn = body.N.Load()
		}
		if rec.Outcome == "" {
			gone := clientCtx.Err() != nil || (s != nil && s.Context().Err() != nil)
			switch {
			case !completed && gone, completed && cw.Status == 0 && gone:
				rec.Outcome = OutcomeCanceled
			case !completed, cw.Status == 0, cw.Status >= 400:
				rec.Outcome = OutcomeError
			default:
				rec.Outcome = OutcomeOK
			}
		}
		h.emit(rec)
	}()
	ctx := context.WithValue(r.Context(), recordKey{}, rec)
	r = r.WithContext(ctx)

	// The pairing first: an unpaired request learns nothing, not even whether its route exists.
	if s = h.authenticate(r); s == nil {
		WriteError(cw, r, http.StatusForbidden, api.CodePairingInvalid,
			"the relay refused this request: no live pairing for this channel (the session ended or was revoked)")
		completed = true
		return
	}
	rec.SessionID, rec.LaunchID, rec.ClientID = s.ID(), s.LaunchID(), s.ClientID()

	if r.Method == http.MethodConnect || isAbsoluteForm(r) {
		WriteError(cw, r, http.StatusForbidden, api.CodeEgressNotSupported,
			"the relay is not a proxy: CONNECT and absolute-form requests are refused; the box's egress is limited to the relay's own routes")
		completed = true
		return
	}
	var next http.Handler
	switch rec.Broker = Route(r.URL.Path); rec.Broker {
	case BrokerSandbox:
		next = h.Sandbox
	case BrokerGit:
		next = h.Git
	}
	if next == nil {
		WriteError(cw, r, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no relay route for %q", r.URL.Path))
		completed = true
		return
	}

	// Revoking or ending the session cancels the request, with the session's cause.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.Context(), func() { cancel(context.Cause(s.Context())) })
	defer stop()
	release := s.Hold()
	defer release()
	r = r.WithContext(session.NewContext(ctx, s))
	if r.Body != nil && r.Body != http.NoBody {
		body = &CountingBody{ReadCloser: r.Body}
		r.Body = body
	}
	// Brokers stream the request body upstream while the answer already flows back. Without
	// full duplex, net/http's HTTP/1 server would drain and close the request body when the
	// response headers are written, under the feet of the transport still sending it, and the
	// upstream connection would die mid-stream. HTTP/2 is always full duplex (ErrNotSupported).
	_ = http.NewResponseController(w).EnableFullDuplex()
	next.ServeHTTP(cw, r)
	completed = true
	if cw.Status != 0 && w.Header().Get("Content-Length") != "" {
		// The answer is whole (its length is known): send it now, before the access line and
		// the audit record are written, not after (net/http sends what the handler left
		// buffered when the handler returns).
		http.NewResponseController(w).Flush()
	}
	if body != nil {
		// Close the body before returning, so that what net/http reads of it to reuse the
		// connection happens while the handler still runs: a full-duplex body first closed
		// after the handler panics the server with "invalid concurrent Body.Read call"
		// (golang/go#68560).
		body.Close()
	}
}

func (h *Handler) emit(rec *Record) {
	if h.Limit != nil && !h.Limit(rec) {
		return
	}
	logf := h.Logf
	if logf == nil {
		logf = log.Printf
	}
	logf("%s", LogLine(rec))
	if h.Audit != nil {
		h.Audit(*rec)
	}
}

// LogLine is the access line of rec, as a Handler writes it (and the daemon a summary's).
func LogLine(rec *Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "relay: launch=%s session=%s client=%s %s %q %d in=%d out=%d dur=%s %s",
		orDash(rec.LaunchID), orDash(rec.SessionID), orDash(rec.ClientID), rec.Method, rec.Path,
		rec.Status, rec.BytesIn, rec.BytesOut, rec.Duration.Round(time.Microsecond), rec.Outcome)
	if rec.Code != "" {
		fmt.Fprintf(&b, " code=%s", rec.Code)
	}
	if u := rec.Usage; u != (Usage{}) {
		fmt.Fprintf(&b, " tokens.in=%d tokens.out=%d", u.InputTokens, u.OutputTokens)
		if u.CacheReadInputTokens != 0 || u.CacheCreationInputTokens != 0 {
			fmt.Fprintf(&b, " tokens.cacheRead=%d tokens.cacheWrite=%d", u.CacheReadInputTokens, u.CacheCreationInputTokens)
		}
	}
	if rec.Count > 0 {
		fmt.Fprintf(&b, " count=%d reason=%s paths=%q", rec.Count, ReasonRateLimited, rec.Paths.String())
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// CopyBufferSize is the size of the buffers the brokers' reverse proxies copy response bodies
// with (CopyBuffers), and of their upstream connections' read and write buffers: a stream is
// forwarded as it arrives, but what has arrived is read and written in one go, in few large
// writes rather than many small ones.
const CopyBufferSize = 64 << 10

// CopyBuffers is the httputil.BufferPool of CopyBufferSize buffers the brokers share.
var CopyBuffers httputil.BufferPool = &bufferPool{}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, CopyBufferSize)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// Serve serves h on ln until ln is closed, and returns nil then. It suits a launch's unix
// socket as well as a loopback TCP listener. Closing ln stops new connections only: requests
// in flight end with their sessions (End, Revoke), which is how a launch's relay goes away.
//
// On a unix socket, a connection's first message may hand over a TCP connection that box-init
// accepted in the box (package handoff): h then serves that connection directly, and the
// pairing check and everything else apply to its requests as to any other.
func Serve(ln net.Listener, h http.Handler) error {
	if _, ok := ln.(*net.UnixListener); ok {
		ln = handoff.Listener(ln)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    256 << 10,
	}
	err := srv.Serve(ln)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
