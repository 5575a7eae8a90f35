package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay"
	"github.com/agentbox/agentbox/internal/relay/llm"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
	"github.com/agentbox/agentbox/internal/relay/session"
)

func TestPairingRequired(t *testing.T) {
	r := newRig(t, rigOptions{})
	_, otherLaunch, err := r.reg.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "claude", LaunchID: "L2"})
	if err != nil {
		t.Fatal(err)
	}
	_, manual, err := r.reg.Create(context.Background(), session.Spec{ClientID: "manual"})
	if err != nil {
		t.Fatal(err)
	}
	revoked, revokedPairing, err := r.reg.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "claude", LaunchID: "L1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.reg.Revoke(context.Background(), revoked.ID()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		header func(h http.Header)
	}{
		{"none", func(h http.Header) {}},
		{"wrong", func(h http.Header) { h.Set("x-api-key", session.PairingPrefix+strings.Repeat("x", 43)) }},
		{"malformed", func(h http.Header) { h.Set("x-api-key", "sk-ant-api03-whatever") }},
		{"host credential", func(h http.Header) { h.Set("x-api-key", r.hostCred) }},
		{"revoked", func(h http.Header) { h.Set("x-api-key", revokedPairing.Reveal()) }},
		{"other launch", func(h http.Header) { h.Set("Authorization", "Bearer "+otherLaunch.Reveal()) }},
		{"manual session on a launch channel", func(h http.Header) { h.Set(session.HeaderName, manual.Reveal()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := r.request(context.Background(), r.path("/v1/messages"), messageBody)
			req.Header.Del("x-api-key")
			tc.header(req.Header)
			expectError(t, r.do(req), http.StatusForbidden, api.CodePairingInvalid)
			rec := r.record()
			if rec.Code != api.CodePairingInvalid || rec.Outcome != relay.OutcomeError || rec.SessionID != "" {
				t.Errorf("record %+v", rec)
			}
		})
	}
	// Unknown routes are refused the same way: an unpaired request learns nothing.
	req := r.request(context.Background(), "/nothing/here", "")
	req.Header.Del("x-api-key")
	expectError(t, r.do(req), http.StatusForbidden, api.CodePairingInvalid)
	r.record()
	if n := len(r.up.Requests()); n != 0 {
		t.Fatalf("upstream received %d requests", n)
	}
}

func TestCredentialsStripped(t *testing.T) {
	for _, provider := range []string{llm.Anthropic, llm.OpenAI} {
		t.Run(provider, func(t *testing.T) {
			r := newRig(t, rigOptions{provider: provider})
			body := messageBody
			if provider == llm.OpenAI {
				body = oaiMessage
			}
			req := r.request(context.Background(), r.defaultPath()+"?beta=true", body)
			p := r.pairing.Reveal()
			req.Header.Set("x-api-key", p)
			req.Header.Set("Authorization", "Bearer "+p)
			req.Header.Set(session.HeaderName, p)
			req.Header.Set("Proxy-Authorization", "Basic "+p)
			req.Header.Add("Cookie", "session="+p)
			req.Header.Set("anthropic-beta", "prompt-caching-2024-07-31,interleaved-thinking-2025-05-14")
			req.Header.Set("X-Stainless-Lang", "js")
			resp := r.do(req)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if strings.Contains(string(b), r.hostCred) {
				t.Fatal("response holds the host credential")
			}
			reqs := r.up.Requests()
			if len(reqs) != 1 {
				t.Fatalf("upstream got %d requests", len(reqs))
			}
			got := reqs[0]
			for k, vs := range got.Header {
				for _, v := range vs {
					if strings.Contains(v, p) {
						t.Errorf("upstream received the box's pairing in %s", k)
					}
				}
			}
			for _, k := range []string{"Proxy-Authorization", "Cookie", session.HeaderName} {
				if v := got.Header.Values(k); len(v) != 0 {
					t.Errorf("upstream received %s: %q", k, v)
				}
			}
			wantHeader, wantValue, other := "X-Api-Key", r.hostCred, "Authorization"
			if provider == llm.OpenAI {
				wantHeader, wantValue, other = "Authorization", "Bearer "+r.hostCred, "X-Api-Key"
			}
			if v := got.Header.Values(wantHeader); len(v) != 1 || v[0] != wantValue {
				t.Errorf("upstream %s = %q, want the host credential", wantHeader, v)
			}
			if v := got.Header.Values(other); len(v) != 0 {
				t.Errorf("upstream received %s: %q", other, v)
			}
			for k, want := range map[string]string{
				"anthropic-beta":   "prompt-caching-2024-07-31,interleaved-thinking-2025-05-14",
				"X-Stainless-Lang": "js",
				"Content-Type":     "application/json",
			} {
				if v := got.Header.Get(k); v != want {
					t.Errorf("upstream %s = %q, want %q", k, v, want)
				}
			}
			if provider == llm.Anthropic && got.Header.Get("anthropic-version") != "2023-06-01" {
				t.Errorf("anthropic-version not forwarded")
			}
			if got.RawQuery != "beta=true" || string(got.Body) != body {
				t.Errorf("upstream got query %q body %q", got.RawQuery, got.Body)
			}
			rec := r.record()
			if rec.Outcome != relay.OutcomeOK || rec.Status != 200 || rec.SessionID != r.sess.ID() ||
				rec.LaunchID != "L1" || rec.Provider != provider || rec.BytesIn != int64(len(body)) || rec.BytesOut != int64(len(b)) {
				t.Errorf("record %+v", rec)
			}
		})
	}
}

// TestSSEStreamsIncrementally guards against buffering: the upstream sends event n+1 only
// after the client has read event n through the relay.
func TestSSEStreamsIncrementally(t *testing.T) {
	read := make(chan int)
	paceErr := make(chan error, 1) // the upstream stopped waiting: fail instead of hanging
	r := newRig(t, rigOptions{up: llmtest.Options{
		Respond: func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "one two three four", Chunk: 4} },
		Pace: func(ctx context.Context, i int, event string) error {
			if i == 0 || i > 5 {
				return nil
			}
			select {
			case got := <-read:
				if got != i-1 {
					paceErr <- fmt.Errorf("client read event %d before the upstream sent event %d", got, i)
					return errors.New("out of order")
				}
				return nil
			case <-ctx.Done():
				paceErr <- fmt.Errorf("upstream request cancelled before event %d: %w", i, context.Cause(ctx))
				return ctx.Err()
			}
		},
	}})
	resp := r.do(r.request(context.Background(), r.defaultPath(), streamBody))
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	er := llmtest.NewEventReader(resp.Body)
	want := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_delta"}
	for i, name := range want {
		ev, err := er.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.Name != name {
			t.Fatalf("event %d is %q, want %q", i, ev.Name, name)
		}
		if i < 5 {
			select {
			case read <- i: // the upstream is waiting for this before it sends event i+1
			case err := <-paceErr:
				t.Fatal(err)
			}
		}
	}
	var names []string
	for {
		ev, err := er.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, ev.Name)
	}
	if got := strings.Join(names, " "); got != "content_block_delta content_block_delta content_block_stop message_delta message_stop" {
		t.Fatalf("rest of the stream: %s", got)
	}
	if rec := r.record(); rec.Outcome != relay.OutcomeOK {
		t.Fatalf("record %+v", rec)
	}
}

// TestRevokeMidStream guards revocation of a stream already answered 200: the client gets an
// in-stream error event, then the end of the stream; the upstream request is cancelled; the
// next request is refused.
func TestRevokeMidStream(t *testing.T) {
	stalled := make(chan struct{})
	upstreamDone := make(chan struct{})
	r := newRig(t, rigOptions{up: llmtest.Options{
		Pace: func(ctx context.Context, i int, event string) error {
			if i < 4 {
				return nil
			}
			close(stalled)
			<-ctx.Done()
			close(upstreamDone)
			return ctx.Err()
		},
	}})
	resp := r.do(r.request(context.Background(), r.defaultPath(), streamBody))
	defer resp.Body.Close()
	er := llmtest.NewEventReader(resp.Body)
	for i := range 4 {
		if _, err := er.Next(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	<-stalled
	if err := r.reg.Revoke(context.Background(), r.sess.ID()); err != nil {
		t.Fatal(err)
	}
	ev, err := er.Next()
	if err != nil {
		t.Fatalf("after revocation: %v", err)
	}
	var e errorAnswer
	if ev.Name != "error" || json.Unmarshal([]byte(ev.Data), &e) != nil || e.Error.Code != api.CodePairingInvalid {
		t.Fatalf("after revocation got event %q %s, want an error event with pairing_invalid", ev.Name, ev.Data)
	}
	if ev, err := er.Next(); err != io.EOF {
		t.Fatalf("stream not closed after the error event: %q %v", ev.Name, err)
	}
	<-upstreamDone // the upstream saw its request cancelled
	rec := r.record()
	if rec.Status != 200 || rec.Outcome != relay.OutcomeCanceled || rec.Code != api.CodePairingInvalid {
		t.Fatalf("record %+v", rec)
	}
	expectError(t, r.do(r.request(context.Background(), r.defaultPath(), streamBody)), http.StatusForbidden, api.CodePairingInvalid)
	r.record()
}

// TestRevokeBeforeAnswer guards revocation of a request the upstream has not answered yet:
// it is cancelled upstream and refused with pairing_invalid.
func TestRevokeBeforeAnswer(t *testing.T) {
	held := make(chan struct{})
	upstreamDone := make(chan struct{})
	r := newRig(t, rigOptions{up: llmtest.Options{
		BeforeReply: func(ctx context.Context, _ llmtest.Request) error {
			close(held)
			<-ctx.Done()
			close(upstreamDone)
			return ctx.Err()
		},
	}})
	answer := make(chan *http.Response)
	go func() { answer <- r.do(r.request(context.Background(), r.defaultPath(), messageBody)) }()
	<-held
	if err := r.reg.Revoke(context.Background(), r.sess.ID()); err != nil {
		t.Fatal(err)
	}
	expectError(t, <-answer, http.StatusForbidden, api.CodePairingInvalid)
	<-upstreamDone
	if rec := r.record(); rec.Outcome != relay.OutcomeCanceled {
		t.Fatalf("record %+v", rec)
	}
}

func TestEndLaunchCancelsStream(t *testing.T) {
	stalled := make(chan struct{})
	r := newRig(t, rigOptions{up: llmtest.Options{
		Pace: func(ctx context.Context, i int, event string) error {
			if i == 1 {
				close(stalled)
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		},
	}})
	resp := r.do(r.request(context.Background(), r.defaultPath(), streamBody))
	defer resp.Body.Close()
	er := llmtest.NewEventReader(resp.Body)
	if _, err := er.Next(); err != nil {
		t.Fatal(err)
	}
	<-stalled
	if err := r.reg.EndLaunch(context.Background(), "L1"); err != nil {
		t.Fatal(err)
	}
	if ev, err := er.Next(); err != nil || ev.Name != "error" {
		t.Fatalf("got %q, %v; want the error event", ev.Name, err)
	}
	if _, err := er.Next(); err != io.EOF {
		t.Fatalf("stream not closed: %v", err)
	}
	r.record()
}

// TestClientDisconnectCancelsUpstream guards the other direction: a client that goes away
// mid-stream cancels the upstream request, and the request still has its access record.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	upstreamDone := make(chan struct{})
	r := newRig(t, rigOptions{up: llmtest.Options{
		Pace: func(ctx context.Context, i int, event string) error {
			if i < 2 {
				return nil
			}
			<-ctx.Done()
			close(upstreamDone)
			return ctx.Err()
		},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	resp := r.do(r.request(ctx, r.defaultPath(), streamBody))
	er := llmtest.NewEventReader(resp.Body)
	for range 2 {
		if _, err := er.Next(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	resp.Body.Close()
	<-upstreamDone
	rec := r.record()
	if rec.Outcome != relay.OutcomeCanceled || rec.SessionID != r.sess.ID() || rec.Status != 200 {
		t.Fatalf("record %+v", rec)
	}
	// The session is untouched by its client going away.
	resp = r.do(r.request(context.Background(), r.defaultPath(), messageBody))
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("next request: %d", resp.StatusCode)
	}
	r.record()
}

func TestCredentialFileRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
		want  []string
	}{
		{"group readable", func(t *testing.T, path string) { os.Chmod(path, 0o640) }, []string{"gateway.anthropic.credential.file", "0640", "chmod 600"}},
		{"world readable", func(t *testing.T, path string) { os.Chmod(path, 0o644) }, []string{"gateway.anthropic.credential.file", "chmod 600"}},
		{"missing", func(t *testing.T, path string) { os.Remove(path) }, []string{"gateway.anthropic.credential.file", "does not exist"}},
		{"directory", func(t *testing.T, path string) { os.Remove(path); os.Mkdir(path, 0o700) }, []string{"not a regular file"}},
		{"empty", func(t *testing.T, path string) { os.WriteFile(path, []byte("\n"), 0o600) }, []string{"empty"}},
		{"other owner", func(t *testing.T, path string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to give the file away; TestCheckCredentialFileOwner covers the check")
			}
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, []string{"owned by uid 65534", "chown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var path string
			r := newRig(t, rigOptions{gateway: func(g *llm.Gateway) { path = g.Credential.File }})
			tc.setup(t, path)
			msg := expectError(t, r.do(r.request(context.Background(), r.defaultPath(), messageBody)),
				http.StatusUnauthorized, api.CodeGatewayCredentialMissing)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, r.hostCred) {
				t.Fatal("message holds the credential")
			}
			if len(r.up.Requests()) != 0 {
				t.Fatal("request forwarded without a credential")
			}
			r.record()
		})
	}
}

func TestCredentialNotConfigured(t *testing.T) {
	r := newRig(t, rigOptions{provider: llm.OpenAI, gateway: func(g *llm.Gateway) { g.Credential = llm.Credential{} }})
	msg := expectError(t, r.do(r.request(context.Background(), r.defaultPath(), oaiMessage)),
		http.StatusUnauthorized, api.CodeGatewayCredentialMissing)
	if !strings.Contains(msg, "gateway.openai.credential.file") || !strings.Contains(msg, "gateway.openai.credential.command") {
		t.Fatalf("message %q does not name the config keys", msg)
	}
	r.record()
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestCredentialCommandCached guards credential.command: its output is reused for the TTL,
// run again after it, and dropped at once when the upstream refuses it.
func TestCredentialCommandCached(t *testing.T) {
	dir := t.TempDir()
	runs, tokenFile := filepath.Join(dir, "runs"), filepath.Join(dir, "token")
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	const good = "sk-from-command-0123456789"
	if err := os.WriteFile(tokenFile, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigOptions{
		up: llmtest.Options{Credential: good},
		gateway: func(g *llm.Gateway) {
			g.Credential = llm.Credential{
				Command: []string{"/bin/sh", "-c", `echo run >> "$0"; cat "$1"`, runs, tokenFile},
				TTL:     time.Minute,
			}
		},
		config: func(c *llm.Config) { c.Now = clk.Now },
	})
	countRuns := func() int {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "run")
	}
	ask := func() int {
		resp := r.do(r.request(context.Background(), r.defaultPath(), messageBody))
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		r.record()
		return resp.StatusCode
	}
	for range 3 {
		if st := ask(); st != 200 {
			t.Fatalf("status %d", st)
		}
	}
	if n := countRuns(); n != 1 {
		t.Fatalf("command ran %d times within the TTL, want 1", n)
	}
	clk.Add(time.Minute)
	ask()
	if n := countRuns(); n != 2 {
		t.Fatalf("command ran %d times after the TTL, want 2", n)
	}
	// The credential is rotated on the host: the cached one is refused upstream once, dropped,
	// and the next request runs the command again.
	os.WriteFile(tokenFile, []byte("sk-stale"), 0o600)
	clk.Add(time.Minute)
	ask() // caches sk-stale, refused
	if st := ask(); st != http.StatusUnauthorized {
		t.Fatalf("stale credential: %d", st)
	}
	os.WriteFile(tokenFile, []byte(good), 0o600)
	if st := ask(); st != 200 {
		t.Fatalf("after rotation: %d", st)
	}
	if n := countRuns(); n != 5 {
		t.Fatalf("command ran %d times, want 5 (each 401 drops the cache)", n)
	}
}

func TestCredentialCommandFails(t *testing.T) {
	r := newRig(t, rigOptions{gateway: func(g *llm.Gateway) {
		g.Credential = llm.Credential{Command: []string{"/bin/sh", "-c", "echo sk-leaked-on-stderr >&2; exit 3"}}
	}})
	msg := expectError(t, r.do(r.request(context.Background(), r.defaultPath(), messageBody)),
		http.StatusUnauthorized, api.CodeGatewayCredentialMissing)
	if !strings.Contains(msg, "gateway.anthropic.credential.command") || !strings.Contains(msg, "exit status 3") || strings.Contains(msg, "leaked") {
		t.Fatalf("message %q", msg)
	}
	r.record()
}

// TestUpstreamUnauthorized guards the upstream's 401: the box gets what to do on the host,
// never the upstream's own words nor the credential.
func TestUpstreamUnauthorized(t *testing.T) {
	for _, provider := range []string{llm.Anthropic, llm.OpenAI} {
		t.Run(provider, func(t *testing.T) {
			r := newRig(t, rigOptions{provider: provider, up: llmtest.Options{Credential: "sk-the-gateway-wants-this"}})
			body := messageBody
			if provider == llm.OpenAI {
				body = oaiMessage
			}
			resp := r.do(r.request(context.Background(), r.defaultPath(), body))
			msg := expectError(t, resp, http.StatusUnauthorized, api.CodeGatewayCredentialRejected)
			for _, bad := range []string{r.hostCred, "sk-the-gateway-wants-this", "invalid x-api-key", "Incorrect API key"} {
				if strings.Contains(msg, bad) {
					t.Errorf("message %q holds %q", msg, bad)
				}
			}
			if !strings.Contains(msg, "on the host") || !strings.Contains(msg, "credential.file") {
				t.Errorf("message %q does not say what to do", msg)
			}
			if rec := r.record(); rec.Status != 401 || rec.Outcome != relay.OutcomeError || rec.Code != api.CodeGatewayCredentialRejected {
				t.Errorf("record %+v", rec)
			}
		})
	}
}

func TestUsageRecorded(t *testing.T) {
	reply := func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "a fine answer", InputTokens: 1234, OutputTokens: 56}
	}
	for _, tc := range []struct{ name, provider, body string }{
		{"anthropic stream", llm.Anthropic, streamBody},
		{"anthropic json", llm.Anthropic, messageBody},
		{"openai stream", llm.OpenAI, oaiStream},
		{"openai json", llm.OpenAI, oaiMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOptions{provider: tc.provider, up: llmtest.Options{Respond: reply}})
			resp := r.do(r.request(context.Background(), r.defaultPath(), tc.body))
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			rec := r.record()
			if rec.Usage.InputTokens != 1234 || rec.Usage.OutputTokens != 56 {
				t.Fatalf("usage %+v", rec.Usage)
			}
			if !strings.Contains(r.logs.String(), "tokens.in=1234 tokens.out=56") {
				t.Fatalf("log line lacks usage:\n%s", r.logs.String())
			}
		})
	}
}

func TestUpstreamErrorsPassThrough(t *testing.T) {
	r := newRig(t, rigOptions{up: llmtest.Options{Respond: func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Status: 529, ErrorType: "overloaded_error", Message: "Overloaded"}
	}}})
	resp := r.do(r.request(context.Background(), r.defaultPath(), messageBody))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || !strings.Contains(string(b), "overloaded_error") {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
	if rec := r.record(); rec.Outcome != relay.OutcomeError || rec.Status != 529 {
		t.Fatalf("record %+v", rec)
	}
}

func TestGatewayUnreachable(t *testing.T) {
	r := newRig(t, rigOptions{gateway: func(g *llm.Gateway) { g.URL = "http://127.0.0.1:1" }})
	msg := expectError(t, r.do(r.request(context.Background(), r.defaultPath(), messageBody)),
		http.StatusBadGateway, api.CodeGatewayUnreachable)
	if !strings.Contains(msg, "gateway.anthropic.url") {
		t.Fatalf("message %q", msg)
	}
	r.record()
}

func TestUnknownProvider(t *testing.T) {
	r := newRig(t, rigOptions{})
	expectError(t, r.do(r.request(context.Background(), "/sandbox/mistral/v1/models", "")), http.StatusNotFound, api.CodeNotFound)
	r.record()
}

// TestRelayFailsClosed guards the Relay mounted without the router: with no session in the
// request's context, it refuses.
func TestRelayFailsClosed(t *testing.T) {
	rl, err := llm.New(llm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := newRecorder()
	req, _ := http.NewRequest(http.MethodPost, "/sandbox/anthropic/v1/messages", strings.NewReader(messageBody))
	req.RequestURI = "/sandbox/anthropic/v1/messages"
	rl.ServeHTTP(w, req)
	if w.code != http.StatusForbidden || !strings.Contains(w.body.String(), api.CodePairingInvalid) {
		t.Fatalf("got %d %s", w.code, w.body.String())
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for name, cfg := range map[string]llm.Config{
		"not http":          {Anthropic: llm.Gateway{URL: "ftp://x"}},
		"no host":           {Anthropic: llm.Gateway{URL: "https://"}},
		"userinfo":          {OpenAI: llm.Gateway{URL: "https://u:p@x"}},
		"query":             {OpenAI: llm.Gateway{URL: "https://x/?k=v"}},
		"file and command":  {Anthropic: llm.Gateway{Credential: llm.Credential{File: "/f", Command: []string{"c"}}}},
		"empty command":     {Anthropic: llm.Gateway{Credential: llm.Credential{Command: []string{""}}}},
		"bad header":        {Anthropic: llm.Gateway{Credential: llm.Credential{Header: "x api key"}}},
		"header with CR LF": {Anthropic: llm.Gateway{Credential: llm.Credential{Header: "Authorization: Bearer\r\nX: y"}}},
	} {
		if _, err := llm.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func TestCustomCredentialHeader(t *testing.T) {
	r := newRig(t, rigOptions{
		up:      llmtest.Options{CredentialHeader: "Authorization: Bearer"},
		gateway: func(g *llm.Gateway) { g.Credential.Header = "Authorization: Bearer" },
	})
	resp := r.do(r.request(context.Background(), r.defaultPath(), messageBody))
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if h := r.up.Requests()[0].Header; h.Get("X-Api-Key") != "" || h.Get("Authorization") != "Bearer "+r.hostCred {
		t.Fatalf("upstream headers %v", h)
	}
	r.record()
}

// TestBodyOfUnknownLength: a body sent without a length (chunked), as a stream, is read whole
// and checked like any other before it leaves (checkTools): the relay no longer streams a
// request body upstream as it comes (full duplex), as a server-side tool declared at its end
// would then have left before the check saw it.
func TestBodyOfUnknownLength(t *testing.T) {
	r := newRig(t, rigOptions{})
	send := func(body string) *http.Response {
		pr, pw := io.Pipe()
		req := r.request(context.Background(), r.defaultPath(), "")
		req.Body, req.ContentLength = pr, -1
		go func() {
			for len(body) > 0 {
				n := min(len(body), 32<<10)
				io.WriteString(pw, body[:n])
				body = body[n:]
			}
			pw.Close()
		}()
		return r.do(req)
	}
	pad := strings.Repeat("x", 300<<10) // more than net/http drains on its own
	body := `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"` + pad + `"}]}`
	resp := send(body)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if reqs := r.up.Requests(); len(reqs) != 1 || string(reqs[0].Body) != body {
		t.Fatalf("the gateway did not get the body whole (%d requests)", len(reqs))
	}
	if rec := r.record(); rec.Outcome != relay.OutcomeOK || rec.BytesIn != int64(len(body)) {
		t.Fatalf("record %+v", rec)
	}
	withTool := `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"` + pad + `"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`
	expectError(t, send(withTool), http.StatusForbidden, api.CodeGatewayToolRefused)
	r.record()
	if reqs := r.up.Requests(); len(reqs) != 1 {
		t.Fatalf("the gateway saw the refused request")
	}
}

// TestAttackEncodedProviderPath guards the LLM relay's single decoding (issue 21, finding 1,
// "every broker"): a path element still holding "%" after the relay's decoding reached the
// gateway with the credential attached, where a second decoding reads %252e%252e as a dot
// segment that leaves the gateway's base path; an encoded "#" or "?" is refused too (the
// router refuses dot segments and empty elements before the LLM relay sees them).
func TestAttackEncodedProviderPath(t *testing.T) {
	r := newRig(t, rigOptions{})
	for _, p := range []string{
		"/v1/%252e%252e/%252e%252e/admin",
		"/v1/messages%2523",
		"/v1/messages%23x",
		"/v1/messages%3Fx=1",
	} {
		t.Run(p, func(t *testing.T) {
			expectError(t, r.do(r.request(context.Background(), r.path(p), messageBody)), http.StatusBadRequest, api.CodeBadRequest)
			if reqs := r.up.Requests(); len(reqs) != 0 {
				t.Errorf("the gateway saw %s %s", reqs[0].Method, reqs[0].Path)
			}
			r.record()
		})
	}
	// A real API path still goes through.
	resp := r.do(r.request(context.Background(), r.defaultPath(), messageBody))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d", r.defaultPath(), resp.StatusCode)
	}
}

// TestAttackAccountEndpoints guards the relay's scope (review 14, F8): a box's requests under a
// provider carried the user's credential to every endpoint the key reaches — the account's
// files listed, downloaded and deleted, an admin key created. The relay now forwards each
// provider's inference endpoints (llm.DefaultEndpoints) and gateway.<provider>.allow only; the
// rest is refused with 403 gateway_path_refused before the credential is read, and never
// reaches the gateway.
func TestAttackAccountEndpoints(t *testing.T) {
	refused := map[string][][2]string{
		llm.OpenAI: {
			{"GET", "/v1/files"}, {"GET", "/v1/files/file-USERDATA/content"}, {"DELETE", "/v1/files/file-USERDATA"},
			{"POST", "/v1/organization/admin_api_keys"}, {"GET", "/v1/responses/resp_1"}, {"POST", "/v1/batches"},
			{"DELETE", "/v1/models/ft:gpt-4o:acme"}, {"POST", "/v1/models"}, {"GET", "/v1/chat/completions"},
		},
		llm.Anthropic: {
			{"GET", "/v1/files"}, {"POST", "/v1/messages/batches"}, {"GET", "/v1/organizations/api_keys"}, {"GET", "/v1/messages"},
		},
		llm.Gemini: {
			{"GET", "/v1beta/files"}, {"DELETE", "/v1beta/files/abc"}, {"POST", "/upload/v1beta/files"},
			{"GET", "/v1beta/cachedContents"}, {"POST", "/v1beta/tunedModels"}, {"DELETE", "/v1beta/models/x"},
		},
	}
	for _, prov := range []string{llm.OpenAI, llm.Anthropic, llm.Gemini} {
		r := newRig(t, rigOptions{provider: prov})
		for _, mp := range refused[prov] {
			t.Run(prov+" "+mp[0]+" "+mp[1], func(t *testing.T) {
				req := r.request(context.Background(), r.path(mp[1]), `{"name":"x"}`)
				req.Method = mp[0]
				msg := expectError(t, r.do(req), http.StatusForbidden, api.CodeGatewayPathRefused)
				if !strings.Contains(msg, mp[1]) || !strings.Contains(msg, "gateway."+prov+".allow") {
					t.Errorf("the message names neither the path nor the key to allow it: %q", msg)
				}
				if rec := r.record(); rec.Code != api.CodeGatewayPathRefused {
					t.Errorf("record %+v", rec)
				}
			})
		}
		if reqs := r.up.Requests(); len(reqs) != 0 {
			t.Errorf("%s: the gateway saw %s %s", prov, reqs[0].Method, reqs[0].Path)
		}
		// The model calls still go through.
		resp := r.do(r.request(context.Background(), r.defaultPath(), map[string]string{llm.OpenAI: oaiMessage, llm.Anthropic: messageBody, llm.Gemini: gemMessage}[prov]))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", r.defaultPath(), resp.StatusCode)
		}
		r.record()
	}
}

// TestGatewayAllow guards gateway.<provider>.allow: an entry forwards its requests (a * in
// the path matching one element), and nothing else is opened.
func TestGatewayAllow(t *testing.T) {
	r := newRig(t, rigOptions{provider: llm.OpenAI, gateway: func(g *llm.Gateway) {
		g.Allow = []string{"GET /v1/files", "GET /v1/files/*/content"}
	}})
	for _, c := range []struct {
		method, path string
		ok           bool
	}{
		{"GET", "/v1/files", true},
		{"GET", "/v1/files/file-1/content", true},
		{"DELETE", "/v1/files/file-1", false},
		{"GET", "/v1/files/a/b/content", false},
		{"POST", "/v1/files", false},
	} {
		req := r.request(context.Background(), r.path(c.path), "")
		req.Method = c.method
		resp := r.do(req)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		r.record()
		if refused := resp.StatusCode == http.StatusForbidden; refused == c.ok {
			t.Errorf("%s %s: %d", c.method, c.path, resp.StatusCode)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, bad := range []string{"", "/v1/x", "get /v1/x", "POST v1/x", "POST  /v1/x", "TRACE /v1/x", "POST /v1/../admin",
		"POST /v1//x", "POST /v1/%2e", "POST /v1/[a]", "POST /v1/x?y", "CONNECT /x"} {
		if _, err := llm.ParseEndpoint(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	for _, good := range []string{"POST /v1/embeddings", "GET /v1/files/*/content", "POST /v1beta/models/*:embedContent"} {
		if _, err := llm.ParseEndpoint(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	if _, err := llm.New(llm.Config{OpenAI: llm.Gateway{Allow: []string{"POST v1/x"}}}); err == nil || !strings.Contains(err.Error(), "gateway.openai.allow") {
		t.Errorf("New: %v", err)
	}
}

// TestAttackServerTools guards the relay against the providers' server-side tools (review 15,
// F12): a model call's body chose tools the provider runs itself — Anthropic's web_fetch and
// web_search and its MCP connector, OpenAI's web_search, mcp and code_interpreter, Gemini's
// urlContext — and the relay forwarded it unchanged, so that the provider fetched any URL or
// called any MCP server for the box, beyond egressAllow. Each is now refused with 403
// gateway_tool_refused naming the tool and the key that allows it, and never reaches the
// gateway; the tools the profiles' programs declare in ordinary requests still go through.
func TestAttackServerTools(t *testing.T) {
	refused := map[string][][2]string{ // body, the tool the message names
		llm.Anthropic: {
			{`{"model":"m","max_tokens":8,"messages":[],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`, "web_fetch"},
			{`{"model":"m","max_tokens":8,"messages":[],"tools":[{"name":"Read","input_schema":{}},{"type":"web_search_20250305","name":"web_search","max_uses":8}]}`, "web_search"},
			{`{"model":"m","max_tokens":8,"messages":[],"mcp_servers":[{"type":"url","url":"https://evil.example.org/mcp","name":"x"}]}`, "mcp"},
			{`{"model":"m","max_tokens":8,"messages":[],"tools":[{"type":"mcp_toolset","mcp_server_name":"x"}]}`, "mcp"},
			{`{"model":"m","max_tokens":8,"messages":[],"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`, "code_execution"},
			{`{"model":"m","max_tokens":8,"messages":[],"tools":[{"type":"some_new_server_tool_20300101","name":"x"}]}`, "some_new_server_tool"},
		},
		llm.OpenAI: {
			{`{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "web_search"},
			{`{"model":"m","input":"hi","tools":[{"type":"web_search","external_web_access":true}]}`, "web_search"},
			{`{"model":"m","input":"hi","tools":[{"type":"web_search_preview_2025_03_11"}]}`, "web_search_preview"},
			{`{"model":"m","input":"hi","tools":[{"type":"mcp","server_label":"x","server_url":"https://evil.example.org/mcp"}]}`, "mcp"},
			{`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"n","tools":[{"type":"mcp","server_url":"https://evil.example.org/mcp"}]}]}`, "mcp"},
			{`{"model":"m","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, "code_interpreter"},
			{`{"model":"m","input":"hi","tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`, "file_search"},
			{`{"model":"m","messages":[],"web_search_options":{}}`, "web_search"},
		},
		llm.Gemini: {
			{`{"contents":[],"tools":[{"urlContext":{}}]}`, "urlContext"},
			{`{"contents":[],"tools":[{"functionDeclarations":[]},{"google_search":{}}]}`, "googleSearch"},
			{`{"contents":[],"tools":[{"codeExecution":{}}]}`, "codeExecution"},
		},
	}
	paths := map[string]string{llm.Anthropic: "/v1/messages", llm.OpenAI: "/v1/responses", llm.Gemini: "/v1beta/models/gemini-2.5-flash:streamGenerateContent"}
	for _, prov := range []string{llm.Anthropic, llm.OpenAI, llm.Gemini} {
		r := newRig(t, rigOptions{provider: prov})
		for i, c := range refused[prov] {
			t.Run(fmt.Sprintf("%s/%d/%s", prov, i, c[1]), func(t *testing.T) {
				p := paths[prov]
				if strings.Contains(c[0], "web_search_options") {
					p = "/v1/chat/completions"
				}
				msg := expectError(t, r.do(r.request(context.Background(), r.path(p), c[0])), http.StatusForbidden, api.CodeGatewayToolRefused)
				for _, want := range []string{"agentbox", fmt.Sprintf("%q", c[1]), "gateway." + prov + ".serverTools"} {
					if !strings.Contains(msg, want) {
						t.Errorf("the message does not say %s: %q", want, msg)
					}
				}
				if rec := r.record(); rec.Code != api.CodeGatewayToolRefused {
					t.Errorf("record %+v", rec)
				}
			})
		}
		if reqs := r.up.Requests(); len(reqs) != 0 {
			t.Errorf("%s: the gateway saw %s %s: %s", prov, reqs[0].Method, reqs[0].Path, reqs[0].Body)
		}
	}
}

// TestServerToolsAllowed: the tools the profiles' programs declare in ordinary requests go
// through — client tools (run in the box), and the server-side tools that reach nothing beyond
// the provider (llm.DefaultServerTools) — and gateway.<provider>.serverTools allows a named
// one. A body the check cannot read as the gateway would (a key twice, not JSON) is refused.
func TestServerToolsAllowed(t *testing.T) {
	forwarded := map[string][]string{
		llm.Anthropic: {
			messageBody,
			`{"model":"m","max_tokens":8,"messages":[],"tools":[{"name":"Bash","description":"d","input_schema":{"type":"object"}},{"type":"custom","name":"c","input_schema":{}}]}`,
			`{"model":"m","max_tokens":8,"messages":[],"tools":[{"type":"bash_20250124","name":"bash"},{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"memory_20250818","name":"memory"}]}`,
			`{"model":"m","max_tokens":8,"messages":[],"tools":[{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"},{"type":"advisor_20260301","name":"advisor"}],"mcp_servers":[]}`,
		},
		llm.OpenAI: {
			`{"model":"m","input":"hi","tools":[{"type":"function","name":"shell","parameters":{}},{"type":"custom","name":"apply_patch"},{"type":"local_shell"}]}`,
			`{"model":"m","input":"hi","tools":[{"type":"web_search","external_web_access":false},{"type":"tool_search"},{"type":"image_generation"}]}`,
			`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"mcp__x","tools":[{"type":"function","name":"f"}]}]}`,
		},
		llm.Gemini: {
			gemMessage,
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"read_file"}]}]}`,
		},
	}
	paths := map[string]string{llm.Anthropic: "/v1/messages", llm.OpenAI: "/v1/responses", llm.Gemini: "/v1beta/models/gemini-2.5-flash:generateContent"}
	for _, prov := range []string{llm.Anthropic, llm.OpenAI, llm.Gemini} {
		r := newRig(t, rigOptions{provider: prov})
		for i, body := range forwarded[prov] {
			resp := r.do(r.request(context.Background(), r.path(paths[prov]), body))
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r.record()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s %d: %d %s", prov, i, resp.StatusCode, b)
			}
		}
	}
	// Allowed by name.
	r := newRig(t, rigOptions{gateway: func(g *llm.Gateway) { g.ServerTools = []string{"web_search"} }})
	resp := r.do(r.request(context.Background(), r.path("/v1/messages"), `{"model":"m","max_tokens":8,"messages":[],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`))
	resp.Body.Close()
	r.record()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("web_search allowed by serverTools: %d", resp.StatusCode)
	}
	expectError(t, r.do(r.request(context.Background(), r.path("/v1/messages"), `{"model":"m","max_tokens":8,"messages":[],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`)), http.StatusForbidden, api.CodeGatewayToolRefused)
	r.record()
	// What a gateway could read otherwise: the first of two keys, a body that is not JSON.
	for _, body := range []string{
		`{"model":"m","tools":[{"type":"web_fetch_20250910","name":"web_fetch"}],"tools":[]}`,
		`{"model":"m","tools":[{"type":"web_fetch_20250910","type":"custom","name":"web_fetch"}]}`,
		`{"model":"m"} {"tools":[{"type":"web_fetch_20250910"}]}`,
		`model=m`,
	} {
		expectError(t, r.do(r.request(context.Background(), r.path("/v1/messages"), body)), http.StatusBadRequest, api.CodeBadRequest)
		r.record()
	}
	if n := len(r.up.Requests()); n != 1 {
		t.Errorf("the gateway saw %d requests, want the allowed one", n)
	}
	if _, err := llm.New(llm.Config{Anthropic: llm.Gateway{ServerTools: []string{"web search"}}}); err == nil || !strings.Contains(err.Error(), "gateway.anthropic.serverTools[0]") {
		t.Errorf("New: %v", err)
	}
}
