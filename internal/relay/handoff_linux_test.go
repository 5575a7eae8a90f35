package relay_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/handoff"
	"github.com/agentbox/agentbox/internal/relay"
)

// TestServeHandoff serves the relay on a launch's unix socket to a TCP client whose
// connections are handed over, as box-init does: the relay serves them directly, keeps them
// alive between requests, and checks the pairing of every request as on any other
// connection, until the session is revoked.
func TestServeHandoff(t *testing.T) {
	r := newRig(t, nil)
	sock := filepath.Join(t.TempDir(), "relay.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- relay.Serve(ln, r.h) }()

	// box-init: every connection to the in-box port is handed over on a new unix connection.
	port, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	handed := make(chan error, 16)
	go func() {
		for {
			c, err := port.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("unix", sock)
			if err == nil {
				err = handoff.Send(u.(*net.UnixConn), c.(*net.TCPConn))
				u.Close()
			}
			c.Close()
			handed <- err
		}
	}()

	client := &http.Client{}
	get := func(pairing string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+port.Addr().String()+"/sandbox/anthropic/v1/models", nil)
		if pairing != "" {
			req.Header.Set("X-Api-Key", pairing)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		<-r.records
		return resp.StatusCode, string(b)
	}
	for range 3 {
		if st, b := get(r.pairing.Reveal()); st != 200 || !strings.HasPrefix(b, "sandbox "+r.sess.ID()) {
			t.Fatalf("got %d %q", st, b)
		}
	}
	if st, b := get(""); st != http.StatusForbidden || !strings.Contains(b, api.CodePairingInvalid) {
		t.Fatalf("without a pairing: %d %q", st, b)
	}
	if err := r.reg.Revoke(context.Background(), r.sess.ID()); err != nil {
		t.Fatal(err)
	}
	if st, b := get(r.pairing.Reveal()); st != http.StatusForbidden || !strings.Contains(b, api.CodePairingInvalid) {
		t.Fatalf("after revocation: %d %q", st, b)
	}
	// One handover per connection: the client kept its connection alive.
	if n := len(handed); n != 1 {
		t.Errorf("%d connections handed over, want 1", n)
	}
	if err := <-handed; err != nil {
		t.Fatalf("handover: %v", err)
	}
	ln.Close()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v after the listener closed", err)
	}
}
