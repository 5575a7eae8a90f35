package llm_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay"
	"github.com/agentbox/agentbox/internal/relay/llm"
	"github.com/agentbox/agentbox/internal/relay/session"
)

// TestRequestBodies guards request bodies of every kind on their way upstream: small ones of
// known length (read whole first), large ones and ones of unknown length (streamed), each
// arriving intact and counted in the access record.
func TestRequestBodies(t *testing.T) {
	r := newRig(t, rigOptions{})
	pad := func(n int) string {
		return fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":%q}]}`, strings.Repeat("x", n))
	}
	for _, tc := range []struct {
		name    string
		body    string
		unknown bool
	}{
		{"small", messageBody, false},
		{"just under 64 KiB", pad(64<<10 - 200), false},
		{"over 64 KiB", pad(200 << 10), false},
		{"unknown length", pad(10 << 10), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := r.request(context.Background(), r.defaultPath(), tc.body)
			if tc.unknown {
				req.Body, req.ContentLength = io.NopCloser(strings.NewReader(tc.body)), -1
			}
			resp := r.do(req)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			reqs := r.up.Requests()
			if got := reqs[len(reqs)-1].Body; string(got) != tc.body {
				t.Fatalf("upstream got %d bytes, want %d", len(got), len(tc.body))
			}
			if rec := r.record(); rec.BytesIn != int64(len(tc.body)) || rec.Outcome != relay.OutcomeOK {
				t.Fatalf("record %+v", rec)
			}
		})
	}
}

// TestRevokeWhileBodyArrives guards revocation of a request whose (small) body has not all
// arrived: the relay, still reading it, answers pairing_invalid and sends nothing upstream.
func TestRevokeWhileBodyArrives(t *testing.T) {
	var gw llm.Gateway
	r := newRig(t, rigOptions{gateway: func(g *llm.Gateway) { gw = *g }})
	rl, err := llm.New(llm.Config{Anthropic: gw})
	if err != nil {
		t.Fatal(err)
	}
	reading := make(chan struct{})
	records := make(chan relay.Record, 1)
	srv := httptest.NewServer(&relay.Handler{
		Sessions: r.reg,
		Scope:    session.Scope{LaunchID: "L1"},
		Sandbox: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			req.Body = &firstRead{ReadCloser: req.Body, c: reading}
			rl.ServeHTTP(w, req)
		}),
		Logf:  t.Logf,
		Audit: func(rec relay.Record) { records <- rec },
	})
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nX-Api-Key: %s\r\nContent-Length: %d\r\n\r\n%s",
		r.defaultPath(), r.pairing.Reveal(), len(messageBody), messageBody[:10])
	<-reading
	if err := r.reg.Revoke(context.Background(), r.sess.ID()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, resp, http.StatusForbidden, api.CodePairingInvalid)
	if rec := <-records; rec.Outcome != relay.OutcomeCanceled || rec.Code != api.CodePairingInvalid {
		t.Fatalf("record %+v", rec)
	}
	if n := len(r.up.Requests()); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}
}

// firstRead closes c when its body is first read.
type firstRead struct {
	io.ReadCloser
	c    chan struct{}
	once sync.Once
}

func (b *firstRead) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.c) })
	return b.ReadCloser.Read(p)
}
