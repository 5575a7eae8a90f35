package relay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// echo is a broker that reports what it was handed.
func echo(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := session.FromContext(r.Context())
		if s == nil {
			http.Error(w, "no session", 500)
			return
		}
		fmt.Fprintf(w, "%s %s %s", name, s.ID(), r.URL.Path)
	})
}

type rig struct {
	reg     *session.Registry
	sess    *session.Session
	pairing session.Pairing
	records chan relay.Record
	h       *relay.Handler
}

func newRig(t *testing.T, git http.Handler) *rig {
	t.Helper()
	reg, err := session.Open(context.Background(), session.Config{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	s, p, err := reg.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "claude", LaunchID: "L1"})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{reg: reg, sess: s, pairing: p, records: make(chan relay.Record, 16)}
	r.h = &relay.Handler{
		Sessions: reg,
		Scope:    session.Scope{LaunchID: "L1"},
		Sandbox:  echo("sandbox"),
		Git:      git,
		Logf:     t.Logf,
		Audit:    func(rec relay.Record) { r.records <- rec },
	}
	return r
}

// raw sends one raw HTTP/1.1 request over a fresh connection and returns the answer.
func raw(t *testing.T, addr, request string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code
}

// TestEgressRefused guards the relay against use as a forward proxy: CONNECT and
// absolute-form requests are refused, after the pairing check.
func TestEgressRefused(t *testing.T) {
	r := newRig(t, nil)
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	p := r.pairing.Reveal()
	for _, tc := range []struct {
		name, req string
		status    int
		code      string
	}{
		{"connect", "CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\nX-Api-Key: " + p + "\r\n\r\n", 403, api.CodeEgressNotSupported},
		{"connect unpaired", "CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\n\r\n", 403, api.CodePairingInvalid},
		{"absolute", "GET http://example.com/sandbox/anthropic/v1/models HTTP/1.1\r\nHost: example.com\r\nX-Api-Key: " + p + "\r\n\r\n", 403, api.CodeEgressNotSupported},
		{"absolute unpaired", "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", 403, api.CodePairingInvalid},
		{"origin form", "GET /sandbox/anthropic/v1/models HTTP/1.1\r\nHost: x\r\nX-Api-Key: " + p + "\r\n\r\n", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, code := raw(t, addr, tc.req)
			if status != tc.status || code != tc.code {
				t.Fatalf("got %d %q, want %d %q", status, code, tc.status, tc.code)
			}
			rec := <-r.records
			if tc.code != "" && rec.Code != tc.code {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	r := newRig(t, nil)
	p := r.pairing.Reveal()
	for _, tc := range []struct {
		name, path string
		header     [2]string
		status     int
		body       string
	}{
		{"sandbox x-api-key", "/sandbox/anthropic/v1/messages", [2]string{"X-Api-Key", p}, 200, "sandbox " + r.sess.ID() + " /sandbox/anthropic/v1/messages"},
		{"sandbox bearer", "/sandbox/openai/v1/chat/completions", [2]string{"Authorization", "Bearer " + p}, 200, "sandbox"},
		{"sandbox bearer lowercase", "/sandbox/openai/v1/models", [2]string{"Authorization", "bearer " + p}, 200, "sandbox"},
		{"sandbox pairing header", "/sandbox/openai/v1/models", [2]string{session.HeaderName, p}, 200, "sandbox"},
		{"git not registered", "/git/github.com/o/r.git/info/refs", [2]string{"X-Api-Key", p}, 404, api.CodeNotFound},
		{"unknown", "/other", [2]string{"X-Api-Key", p}, 404, api.CodeNotFound},
		{"dot dot", "/sandbox/../git/x", [2]string{"X-Api-Key", p}, 404, api.CodeNotFound},
		{"encoded dot dot", "/sandbox/anthropic/%2e%2e/%2e%2e/git/x", [2]string{"X-Api-Key", p}, 404, api.CodeNotFound},
		{"double slash", "/sandbox//anthropic/v1", [2]string{"X-Api-Key", p}, 404, api.CodeNotFound},
		{"basic auth is no pairing", "/sandbox/anthropic/v1/messages", [2]string{"Authorization", "Basic " + p}, 403, api.CodePairingInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://relay"+tc.path, nil)
			req.RequestURI = tc.path
			req.Header.Set(tc.header[0], tc.header[1])
			w := httptest.NewRecorder()
			r.h.ServeHTTP(w, req)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
				t.Fatalf("got %d %q, want %d %q", w.Code, w.Body.String(), tc.status, tc.body)
			}
			<-r.records
		})
	}
}

func TestGitRegistration(t *testing.T) {
	r := newRig(t, echo("git"))
	req := httptest.NewRequest(http.MethodGet, "/git/github.com/o/r.git/info/refs?service=git-upload-pack", nil)
	req.Header.Set(session.HeaderName, r.pairing.Reveal())
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	if w.Code != 200 || !strings.HasPrefix(w.Body.String(), "git ") {
		t.Fatalf("got %d %q", w.Code, w.Body.String())
	}
	if rec := <-r.records; rec.Broker != relay.BrokerGit || rec.Outcome != relay.OutcomeOK {
		t.Fatalf("record %+v", rec)
	}
}

// TestRequestTiedToSession guards the cancellation path every broker relies on: a request's
// context ends when its session is revoked, with the session's cause.
func TestRequestTiedToSession(t *testing.T) {
	entered := make(chan context.Context)
	r := newRig(t, nil)
	r.h.Sandbox = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		entered <- req.Context()
		<-req.Context().Done()
	})
	req := httptest.NewRequest(http.MethodPost, "/sandbox/anthropic/v1/messages", strings.NewReader("{}"))
	req.Header.Set("X-Api-Key", r.pairing.Reveal())
	done := make(chan struct{})
	go func() {
		r.h.ServeHTTP(httptest.NewRecorder(), req)
		close(done)
	}()
	ctx := <-entered
	if err := r.reg.Revoke(context.Background(), r.sess.ID()); err != nil {
		t.Fatal(err)
	}
	<-done
	if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "revoked") {
		t.Fatalf("cause %v", cause)
	}
	if rec := <-r.records; rec.Outcome != relay.OutcomeCanceled {
		t.Fatalf("record %+v", rec)
	}
}

func TestZeroHandlerRefuses(t *testing.T) {
	var h relay.Handler
	h.Logf = t.Logf
	req := httptest.NewRequest(http.MethodGet, "/sandbox/anthropic/v1/models", nil)
	req.Header.Set("X-Api-Key", session.PairingPrefix+strings.Repeat("a", 43))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden {
		t.Fatalf("zero Handler answered %d", w.Code)
	}
}

// TestServeUnixSocket serves the relay on a unix socket, as for a launch, and stops it by
// closing the listener.
func TestServeUnixSocket(t *testing.T) {
	r := newRig(t, nil)
	sock := filepath.Join(t.TempDir(), "relay.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- relay.Serve(ln, r.h) }()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	req, _ := http.NewRequest(http.MethodGet, "http://relay/sandbox/anthropic/v1/models", nil)
	req.Header.Set("X-Api-Key", r.pairing.Reveal())
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "sandbox") {
		t.Fatalf("got %d %q", resp.StatusCode, b)
	}
	<-r.records
	ln.Close()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v after the listener closed", err)
	}
}

// TestSharedListener guards the shared host loopback listener (`egress: allow`): with the
// zero Scope it admits manual sessions and every launch's session.
func TestSharedListener(t *testing.T) {
	r := newRig(t, nil)
	_, manual, err := r.reg.Create(context.Background(), session.Spec{ClientID: "manual"})
	if err != nil {
		t.Fatal(err)
	}
	r.h.Scope = session.Scope{}
	for _, p := range []session.Pairing{manual, r.pairing} {
		req := httptest.NewRequest(http.MethodGet, "/sandbox/anthropic/v1/models", nil)
		req.Header.Set("X-Api-Key", p.Reveal())
		w := httptest.NewRecorder()
		r.h.ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("got %d %s", w.Code, w.Body.String())
		}
		<-r.records
	}
}

// TestAnswerBeforeAccessLine guards the order of a whole answer (of known length) and its
// access line: the client has the answer before the relay writes the line and the record.
func TestAnswerBeforeAccessLine(t *testing.T) {
	r := newRig(t, nil)
	got := make(chan struct{})
	r.h.Sandbox = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
	})
	r.h.Logf = func(string, ...any) {
		select {
		case <-got:
		case <-time.After(20 * time.Second): // a deadlock guard: the client waits for the answer
			t.Error("the access line was written before the client had its answer")
		}
	}
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/sandbox/anthropic/v1/models", nil)
	req.Header.Set("X-Api-Key", r.pairing.Reveal())
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "ok" {
		t.Fatalf("got %q, %v", b, err)
	}
	close(got)
	<-r.records
}
