//go:build linux

package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
)

// TestAttackRelayPortTakeover (issue 21, finding 12): while no daemon runs, another process
// binds the relay's remembered loopback port first; the next daemon cannot listen there. The
// pairing of a session created by hand on the old address (which its client keeps sending
// there, to whoever holds the port now) must not open the relay on the new one: the replay is
// refused with pairing_invalid, the gateway never sees a request, and `agentbox info` says
// what happened. Before the fix the daemon moved silently and answered the replay with the
// user's gateway credential attached. The squatter here is the test process itself: binding a
// loopback port is open to every local user, so the daemon meets the same refusal whoever
// holds it.
func TestAttackRelayPortTakeover(t *testing.T) {
	e, up := relayEnvWith(t, llmtest.Options{})
	r := e.Run("", "session", "create", "--client", "tool", "--json")
	if r.Code != 0 {
		t.Fatalf("session create: exit %d: %s", r.Code, r.Stderr)
	}
	var s api.SessionCreated
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
		t.Fatalf("session create --json: %v: %s", err, r.Stdout)
	}
	old, err := url.Parse(s.RelayURL)
	if err != nil {
		t.Fatal(err)
	}

	pid := e.DaemonPid()
	if pid == 0 {
		t.Fatal("no daemon pid")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	e.waitDaemonGone(t, pid)
	// The kernel frees the port once the killed daemon's descriptors are closed.
	var squat net.Listener
	eventually(t, "the relay's port "+old.Host+" taken by another process", func() bool {
		squat, err = net.Listen("tcp", old.Host)
		return err == nil
	})
	defer squat.Close()

	// The next daemon (started by this command) listens where it can: on a new port.
	r = e.Run("", "session", "create", "--client", "probe", "--json")
	if r.Code != 0 {
		t.Fatalf("session create after the restart: exit %d: %s", r.Code, r.Stderr)
	}
	var fresh api.SessionCreated
	if err := json.Unmarshal([]byte(r.Stdout), &fresh); err != nil {
		t.Fatal(err)
	}
	now, err := url.Parse(fresh.RelayURL)
	if err != nil {
		t.Fatal(err)
	}
	if now.Host == old.Host {
		t.Fatalf("the next daemon listens on %s, which the squatter holds", now.Host)
	}

	// The squatter replays the pairing it received on the old address at the new one.
	before := len(up.Requests())
	req, err := http.NewRequest(http.MethodPost, fresh.RelayURL+"/sandbox/anthropic/v1/messages", strings.NewReader(messagesBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", s.Pairing)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "pairing_invalid") {
		t.Errorf("the pairing issued on the taken address, replayed on the new one: %s %s, want 403 pairing_invalid", resp.Status, body)
	}
	if n := len(up.Requests()); n != before {
		t.Errorf("the gateway got %d request(s) from the replay", n-before)
	}

	// The user is told: `agentbox info` names the taken address and the revoked session.
	r = e.Run("", "info")
	if r.Code != 0 || !strings.Contains(r.Stderr, old.Host) || !strings.Contains(r.Stderr, s.ID) {
		t.Errorf("agentbox info does not say the relay's address %s was taken and session %s revoked: exit %d\n%s", old.Host, s.ID, r.Code, r.Stderr)
	}
	// A session made after the move works on the new address.
	req, _ = http.NewRequest(http.MethodPost, fresh.RelayURL+"/sandbox/anthropic/v1/messages", strings.NewReader(messagesBody))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", fresh.Pairing)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a session created after the move: %s, want 200", resp.Status)
	}
}
