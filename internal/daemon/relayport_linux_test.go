package daemon

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/broker/brokertest"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/plan"
)

// TestRelayPortTakenRevokesAllowLaunch (issue 21, finding 12, the re-adoption path): a launch
// with egress: allow reaches the relay on the shared loopback port. While no daemon runs another
// process takes that port; the next daemon's Resume of the launch fails, the launch's session
// is revoked (its pairing, sent to the old port, opens nothing on the new one), and the relay's
// notice names the taken address and the session. Without the revocation in Resume the launch
// is served on the new port with its old pairing and the test fails.
func TestRelayPortTakenRevokesAllowLaunch(t *testing.T) {
	t.Parallel()
	dir := brokertest.Dir(t)
	lives := &brokerLives{}
	first := lives.start(t, dir)
	l := launchFor(t, dir, "allow", plan.EgressAllow, config.Defaults())
	var c plan.Contributions
	if err := first.brokers.Prepare(context.Background(), l, &c); err != nil {
		t.Fatal(err)
	}
	lives.record(t, l)
	t.Cleanup(func() {
		if lives.cur != nil {
			lives.cur.brokers.End(l.ID)
		}
	})
	if err := relayAnswers(l, c); err != nil {
		t.Fatalf("before the restart: %v", err)
	}
	sess := first.sessions.OfLaunch(l.ID)
	u, err := url.Parse(envOf(&c, EnvRelayURL))
	if err != nil {
		t.Fatal(err)
	}
	lives.stop(first)
	squat, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Fatalf("take the relay's port %s: %v", u.Host, err)
	}
	defer squat.Close()

	second := lives.start(t, dir)
	t.Cleanup(func() { lives.stop(second) })
	if err := second.relay.Resume(context.Background(), l); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("Resume of the launch whose relay address was taken = %v, want its session revoked", err)
	}
	if second.sessions.OfLaunch(l.ID) != nil {
		t.Error("the launch's session is live after its relay address was taken")
	}
	// Its pairing, replayed on the port the daemon listens on now, opens nothing.
	addr, err := second.relay.sharedListener(config.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	moved := c
	moved.Env = append(append([]string(nil), c.Env...), EnvRelayURL+"=http://"+addr)
	if err := relayAnswers(l, moved); err == nil {
		t.Errorf("the launch's pairing is admitted on the new address %s", addr)
	}
	if n := second.relay.notice(); !strings.Contains(n, u.Host) || !strings.Contains(n, sess.ID()) {
		t.Errorf("relay notice %q does not name the taken address %s and session %s", n, u.Host, sess.ID())
	}
}
