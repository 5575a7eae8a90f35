package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/relay"
	"github.com/agentbox/agentbox/internal/relay/llm"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// syncBuffer collects log lines from the relay's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) logf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(&b.buf, format+"\n", args...)
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// rig is a relay for launch L1 in front of a fake upstream, end to end over real HTTP:
// client → relay.Handler (pairing, routing) → llm.Relay → fake upstream.
type rig struct {
	t        testing.TB
	reg      *session.Registry
	up       *llmtest.Server
	srv      *httptest.Server
	sess     *session.Session
	pairing  session.Pairing
	hostCred string
	records  chan relay.Record
	logs     *syncBuffer
	provider string
}

type rigOptions struct {
	provider string // zero: anthropic
	up       llmtest.Options
	// gateway edits the provider's gateway config (the credential file is set before).
	gateway func(*llm.Gateway)
	config  func(*llm.Config)
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	if o.provider == "" {
		o.provider = llm.Anthropic
	}
	hostCred := "sk-host-" + strings.Repeat("s3cr3t", 4)
	if o.up.Credential == "" {
		o.up.Credential = hostCred
	}
	var up *llmtest.Server
	switch o.provider {
	case llm.OpenAI:
		up = llmtest.NewOpenAI(o.up)
	case llm.Gemini:
		up = llmtest.NewGemini(o.up)
	default:
		up = llmtest.NewAnthropic(o.up)
	}
	t.Cleanup(up.Close)

	credFile := filepath.Join(t.TempDir(), "credential")
	if err := os.WriteFile(credFile, []byte(hostCred+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := llm.Gateway{URL: up.URL, Credential: llm.Credential{File: credFile}}
	if o.gateway != nil {
		o.gateway(&gw)
	}
	var cfg llm.Config
	switch o.provider {
	case llm.OpenAI:
		cfg.OpenAI = gw
	case llm.Gemini:
		cfg.Gemini = gw
	default:
		cfg.Anthropic = gw
	}
	if o.config != nil {
		o.config(&cfg)
	}
	rl, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := session.Open(context.Background(), session.Config{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	s, p, err := reg.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "claude", LaunchID: "L1"})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, reg: reg, up: up, sess: s, pairing: p, hostCred: hostCred,
		records: make(chan relay.Record, 64), logs: &syncBuffer{}, provider: o.provider}
	h := &relay.Handler{
		Sessions: reg,
		Scope:    session.Scope{LaunchID: "L1"},
		Sandbox:  rl,
		Logf:     r.logs.logf,
		Audit: func(rec relay.Record) {
			select {
			case r.records <- rec:
			default: // benchmarks do not read them
			}
		},
	}
	// The relay's server must never log a panic (golang/go#68560 with full duplex, say).
	serverLog := &syncBuffer{}
	t.Cleanup(func() {
		if l := serverLog.String(); l != "" {
			t.Errorf("relay server logged:\n%s", l)
		}
	})
	r.srv = httptest.NewUnstartedServer(h)
	r.srv.Config.ErrorLog = log.New(serverLog, "", 0)
	r.srv.Start()
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log:\n%s", r.logs.String())
		}
		// The credential and the pairing never appear in the relay's log.
		if l := r.logs.String(); strings.Contains(l, hostCred) || strings.Contains(l, p.Reveal()) {
			t.Errorf("log holds a secret:\n%s", l)
		}
	})
	return r
}

// path returns the relay path of an API path for the rig's provider.
func (r *rig) path(api string) string { return "/sandbox/" + r.provider + api }

// defaultPath is the API's completion endpoint (Gemini: not streamed; gemStreamPath is).
func (r *rig) defaultPath() string {
	switch r.provider {
	case llm.OpenAI:
		return r.path("/v1/chat/completions")
	case llm.Gemini:
		return r.path("/v1beta/models/gemini-2.5-flash:generateContent")
	}
	return r.path("/v1/messages")
}

// request builds a request to the relay carrying the rig's pairing the way the provider's
// SDK would (x-api-key for Anthropic, Authorization: Bearer for OpenAI, x-goog-api-key for
// Gemini).
func (r *rig) request(ctx context.Context, path, body string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.srv.URL+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	switch r.provider {
	case llm.OpenAI:
		req.Header.Set("Authorization", "Bearer "+r.pairing.Reveal())
	case llm.Gemini:
		req.Header.Set("x-goog-api-key", r.pairing.Reveal())
	default:
		req.Header.Set("x-api-key", r.pairing.Reveal())
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	return req
}

func (r *rig) do(req *http.Request) *http.Response {
	r.t.Helper()
	resp, err := r.srv.Client().Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// record returns the next access record (records are written when a response has ended).
func (r *rig) record() relay.Record {
	return <-r.records
}

const (
	streamBody  = `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	messageBody = `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	oaiStream   = `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	oaiMessage  = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	gemMessage  = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
)

type errorAnswer struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// expectError reads resp and checks its status and error code; it returns the message.
func expectError(t testing.TB, resp *http.Response, status int, code string) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var e errorAnswer
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("status %d, body %q is not an error answer: %v", resp.StatusCode, b, err)
	}
	if resp.StatusCode != status || e.Error.Code != code {
		t.Fatalf("got %d %q (%s), want %d %q", resp.StatusCode, e.Error.Code, e.Error.Message, status, code)
	}
	return e.Error.Message
}
