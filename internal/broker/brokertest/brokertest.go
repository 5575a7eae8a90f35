// Package brokertest is the conformance suite every broker.Broker passes: Prepare fails
// closed, End is idempotent, and a launch prepared under one daemon is served again by the
// next one after a restart (Resume). A broker's tests call Run with a Harness that builds the
// broker as the daemon does, from its real dependencies.
package brokertest

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/plan"
)

// Harness describes a broker to the suite.
type Harness struct {
	// Start starts one daemon life over the directories under dir (the same dir again after a
	// restart): the broker's dependencies as the daemon makes them (store, pairing registry,
	// runtime and state directories), the broker from them. It returns the brokers in the
	// daemon's order with the one under test last (those before it are the ones it needs: the
	// relay, whose pairing session the egress proxy and the ssh broker take), and stop, which
	// ends that life as the daemon's exit does: listeners and watches closed, nothing ended —
	// sessions, state files and boxes stay for the next life. Required.
	Start func(t *testing.T, dir string) (brokers []broker.Broker, stop func())
	// Launch returns launch id as the daemon describes it to its brokers, with what the broker
	// under test needs to take part (its configuration, the egress mode). Its RunDir is
	// dir/run/launches/<id>/run and exists, mode 0700, as the daemon makes it. Required.
	Launch func(t *testing.T, dir, id string) *broker.Launch
	// Record, when set, records launch l after its Prepare as the daemon's record stage does
	// before the box runs (the relay's pairing session is saved with the launch's record: a
	// restart keeps what was recorded). Nil records nothing.
	Record func(t *testing.T, l *broker.Launch)
	// Break changes l so that the broker under test must refuse it: a configuration it does
	// not accept, a folder it cannot use. Required.
	Break func(t *testing.T, l *broker.Launch)
	// Serving returns nil when the brokers of the running life serve launch l, and why not
	// otherwise: a client of what c gave the box (its sockets, its pairing) is answered by the
	// broker under test, or its watch of the launch reports a change. Required.
	Serving func(t *testing.T, l *broker.Launch, c plan.Contributions) error
	// Held lists what the brokers of the running life (or the host) still hold for launch l:
	// a live pairing session, a socket that accepts, a watch, placeholders. Empty after a
	// failed Prepare and after End. Required.
	Held func(t *testing.T, l *broker.Launch, c plan.Contributions) []string
	// Revoke, for a broker a launch's pairing gates, revokes launch l's pairing session as
	// `agentbox revoke` does. Nil skips the revocation test (the integrity watch goes on for a
	// revoked launch).
	Revoke func(t *testing.T, l *broker.Launch)
}

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	t.Run("PrepareFailsClosed", func(t *testing.T) { testPrepareFailsClosed(t, h) })
	t.Run("EndIdempotent", func(t *testing.T) { testEndIdempotent(t, h) })
	t.Run("ResumeAfterRestart", func(t *testing.T) { testResumeAfterRestart(t, h) })
	t.Run("EndAfterRestart", func(t *testing.T) { testEndAfterRestart(t, h) })
	t.Run("RevokedAfterRestart", func(t *testing.T) {
		if h.Revoke == nil {
			t.Skip("no pairing gates this broker")
		}
		testRevokedAfterRestart(t, h)
	})
}

// Dir returns a fresh directory for a harness's daemon lives: short (unix socket paths are
// bounded), mode 0700, removed after the test.
func Dir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "abbt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"run/launches", "state", "config", "home", "work"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// RunDir makes and returns launch id's run directory under dir, as the daemon makes it.
func RunDir(t *testing.T, dir, id string) string {
	t.Helper()
	rd := filepath.Join(dir, "run", "launches", id, "run")
	if err := os.MkdirAll(rd, 0o700); err != nil {
		t.Fatal(err)
	}
	return rd
}

// life is one started daemon life.
type life struct {
	list broker.List
	stop func()
}

func start(t *testing.T, h Harness, dir string) *life {
	t.Helper()
	bs, stop := h.Start(t, dir)
	if len(bs) == 0 {
		t.Fatal("the harness started no broker")
	}
	l := &life{list: broker.List{Brokers: bs}, stop: stop}
	t.Cleanup(l.end)
	return l
}

// end stops the life once.
func (l *life) end() {
	if l.stop != nil {
		l.stop()
		l.stop = nil
	}
}

func (l *life) prepare(t *testing.T, h Harness, dir, id string) (*broker.Launch, plan.Contributions) {
	t.Helper()
	bl := h.Launch(t, dir, id)
	var c plan.Contributions
	if err := l.list.Prepare(context.Background(), bl, &c); err != nil {
		t.Fatalf("prepare launch %s: %v", id, err)
	}
	t.Cleanup(func() { l.list.End(id) })
	if h.Record != nil {
		h.Record(t, bl)
	}
	if err := h.Serving(t, bl, c); err != nil {
		t.Fatalf("launch %s is not served after Prepare: %v", id, err)
	}
	return bl, c
}

// testPrepareFailsClosed: a launch the broker must refuse fails to prepare, adds nothing to
// the plan, and leaves nothing served; the brokers before it are ended too (broker.List), and
// End afterwards does no harm. A launch prepared next by the same daemon is served.
func testPrepareFailsClosed(t *testing.T, h Harness) {
	dir := Dir(t)
	lf := start(t, h, dir)
	bl := h.Launch(t, dir, "broken")
	h.Break(t, bl)
	c := plan.Contributions{Env: []string{"KEPT=1"}}
	err := lf.list.Prepare(context.Background(), bl, &c)
	if err == nil {
		lf.list.End(bl.ID)
		t.Fatal("Prepare accepted the broken launch")
	}
	t.Logf("Prepare refused the broken launch: %v", err)
	if want := (plan.Contributions{Env: []string{"KEPT=1"}}); !reflect.DeepEqual(c, want) {
		t.Errorf("the failed Prepare changed the contributions: %+v", c)
	}
	if held := h.Held(t, bl, c); len(held) > 0 {
		t.Errorf("after the failed Prepare the brokers hold %v", held)
	}
	lf.list.End(bl.ID)
	if held := h.Held(t, bl, c); len(held) > 0 {
		t.Errorf("after the failed Prepare and End the brokers hold %v", held)
	}
	lf.prepare(t, h, dir, "next")
}

// testEndIdempotent: End stops serving a launch; a second End, and End of a launch the broker
// never prepared, do nothing (and do not disturb another launch).
func testEndIdempotent(t *testing.T, h Harness) {
	dir := Dir(t)
	lf := start(t, h, dir)
	bl, c := lf.prepare(t, h, dir, "ended")
	other, oc := lf.prepare(t, h, dir, "other")
	lf.list.End(bl.ID)
	ended(t, h, bl, c, "End")
	lf.list.End(bl.ID)
	lf.list.End("never-prepared")
	ended(t, h, bl, c, "a second End")
	if err := h.Serving(t, other, oc); err != nil {
		t.Errorf("the other launch is not served after the first launch's ends: %v", err)
	}
}

// testResumeAfterRestart: a launch prepared under one daemon life is not served while no
// daemon runs, is served again after the next life's Resume with what the box already holds
// (its contributions are not made again), and End then stops it.
func testResumeAfterRestart(t *testing.T, h Harness) {
	dir := Dir(t)
	first := start(t, h, dir)
	bl, c := first.prepare(t, h, dir, "resumed")
	first.end()
	if err := h.Serving(t, bl, c); err == nil {
		t.Fatal("the launch is served while no daemon runs: the harness's stop left its broker running")
	}
	second := start(t, h, dir)
	second.list.Resume(context.Background(), bl)
	if err := h.Serving(t, bl, c); err != nil {
		t.Fatalf("the launch is not served after the restart's Resume: %v", err)
	}
	second.list.End(bl.ID)
	ended(t, h, bl, c, "End of the resumed launch")
}

// testEndAfterRestart: a box that ended while no daemon ran is ended by the next daemon
// without a Resume; what the launch held beyond the daemon's life (its pairing session,
// placeholders) is released then, and a third life finds nothing of it.
func testEndAfterRestart(t *testing.T, h Harness) {
	dir := Dir(t)
	first := start(t, h, dir)
	bl, c := first.prepare(t, h, dir, "gone")
	first.end()
	second := start(t, h, dir)
	second.list.End(bl.ID)
	ended(t, h, bl, c, "the next daemon's End")
	second.end()
	start(t, h, dir)
	if held := h.Held(t, bl, c); len(held) > 0 {
		t.Errorf("a third daemon holds %v of a launch an earlier one ended", held)
	}
}

// testRevokedAfterRestart: a revoked launch is not served — its box keeps running — and a
// restart's Resume does not serve it again: revocation outlives the daemon.
func testRevokedAfterRestart(t *testing.T, h Harness) {
	dir := Dir(t)
	first := start(t, h, dir)
	bl, c := first.prepare(t, h, dir, "revoked")
	h.Revoke(t, bl)
	if err := h.Serving(t, bl, c); err == nil {
		t.Fatal("the launch is served after its revocation")
	}
	first.end()
	second := start(t, h, dir)
	second.list.Resume(context.Background(), bl)
	if err := h.Serving(t, bl, c); err == nil {
		t.Error("the revoked launch is served again after the restart's Resume")
	}
	second.list.End(bl.ID)
}

// ended checks that launch bl is neither served nor held after what.
func ended(t *testing.T, h Harness, bl *broker.Launch, c plan.Contributions, what string) {
	t.Helper()
	if err := h.Serving(t, bl, c); err == nil {
		t.Errorf("the launch is served after %s", what)
	}
	if held := h.Held(t, bl, c); len(held) > 0 {
		t.Errorf("after %s the brokers hold %v", what, held)
	}
}
