package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is an injected wall clock without a monotonic reading, so tests can step it
// backwards.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
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

func open(t *testing.T, cfg Config) *Registry {
	t.Helper()
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	r, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func create(t *testing.T, r *Registry, spec Spec) (*Session, Pairing) {
	t.Helper()
	s, p, err := r.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}

func isDone(s *Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

func TestCreateAuthenticate(t *testing.T) {
	mem := &MemPersister{}
	r := open(t, Config{Persister: mem})
	s, p := create(t, r, Spec{Kind: KindLaunch, ClientID: "claude", LaunchID: "L1"})

	if !strings.HasPrefix(p.Reveal(), PairingPrefix) || !WellFormed(p.Reveal()) {
		t.Fatalf("pairing %q is not well formed", p.Reveal())
	}
	if !strings.HasPrefix(s.ID(), "s_") || strings.Contains(p.Reveal(), s.ID()[2:]) {
		t.Fatalf("session id %q", s.ID())
	}
	got, err := r.Authenticate(p.Reveal(), Scope{})
	if err != nil || got != s {
		t.Fatalf("Authenticate = %v, %v", got, err)
	}
	for name, bad := range map[string]string{
		"empty":        "",
		"no prefix":    strings.TrimPrefix(p.Reveal(), PairingPrefix),
		"one changed":  p.Reveal()[:len(p)-1] + string(p.Reveal()[len(p)-1]^1),
		"truncated":    p.Reveal()[:len(p)-1],
		"padded":       p.Reveal() + "=",
		"other secret": "abp_" + strings.Repeat("A", 43),
	} {
		if _, err := r.Authenticate(bad, Scope{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Authenticate = %v, want ErrInvalid", name, err)
		}
	}

	// Only the hash is stored.
	recs, _ := mem.LoadSessions(context.Background())
	if len(recs) != 1 || recs[0].Hash != HashOf(p.Reveal()) || recs[0].State != StateLive {
		t.Fatalf("stored records = %+v", recs)
	}
	if dump := fmt.Sprintf("%+v %#v", recs, recs); strings.Contains(dump, p.Reveal()) {
		t.Fatal("stored record holds the pairing")
	}
}

func TestCreateRefusesBadSpec(t *testing.T) {
	r := open(t, Config{})
	for name, spec := range map[string]Spec{
		"no client":          {Kind: KindManual},
		"launch without id":  {Kind: KindLaunch, ClientID: "c"},
		"manual with launch": {Kind: KindManual, ClientID: "c", LaunchID: "L"},
		"unknown kind":       {Kind: "forever", ClientID: "c"},
		"manual unsaved":     {Kind: KindManual, ClientID: "c", Unsaved: true},
	} {
		if _, _, err := r.Create(context.Background(), spec); err == nil {
			t.Errorf("%s: Create succeeded", name)
		}
	}
}

func TestPairingNeverPrinted(t *testing.T) {
	r := open(t, Config{})
	_, p := create(t, r, Spec{ClientID: "c"})
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "pairing", p)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "pairing", p)
	fmt.Fprintf(&buf, "%v %s %q %x %#v %+v", p, p, p, p, p, struct{ P Pairing }{p})
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "in", struct{ P Pairing }{p})
	j, err := json.Marshal(map[string]any{"p": p, "s": struct{ P Pairing }{p}})
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(j)
	if strings.Contains(buf.String(), p.Reveal()) {
		t.Fatalf("pairing printed: %s", buf.String())
	}
}

// TestLimit guards the bound of live sessions: the 65th is refused with the limit and the
// config key in the message, launch sessions count, and ending one makes room.
func TestLimit(t *testing.T) {
	r := open(t, Config{})
	var first *Session
	for i := range DefaultMax {
		spec := Spec{ClientID: "c"}
		if i%2 == 0 {
			spec = Spec{Kind: KindLaunch, ClientID: "claude", LaunchID: fmt.Sprint("L", i)}
		}
		s, _ := create(t, r, spec)
		if first == nil {
			first = s
		}
	}
	_, _, err := r.Create(context.Background(), Spec{ClientID: "c"})
	if !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("65th Create = %v, want ErrTooManySessions", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "64") || !strings.Contains(msg, "sessions.max") {
		t.Fatalf("error %q does not name the limit and sessions.max", msg)
	}
	if err := r.End(context.Background(), first.ID()); err != nil {
		t.Fatal(err)
	}
	create(t, r, Spec{ClientID: "c"})

	small := open(t, Config{Max: 2})
	create(t, small, Spec{ClientID: "c"})
	create(t, small, Spec{ClientID: "c"})
	if _, _, err := small.Create(context.Background(), Spec{ClientID: "c"}); !errors.Is(err, ErrTooManySessions) || !strings.Contains(err.Error(), "limit is 2") {
		t.Fatalf("third Create with Max 2 = %v", err)
	}
}

func TestAllowedClients(t *testing.T) {
	r := open(t, Config{AllowedClients: []string{"claude", "codex"}})
	create(t, r, Spec{Kind: KindLaunch, ClientID: "claude", LaunchID: "L"})
	_, _, err := r.Create(context.Background(), Spec{ClientID: "curl"})
	if !errors.Is(err, ErrClientNotAllowed) || !strings.Contains(err.Error(), "sessions.allowedClients") || !strings.Contains(err.Error(), `"curl"`) {
		t.Fatalf("Create(curl) = %v", err)
	}
}

func TestScope(t *testing.T) {
	r := open(t, Config{})
	s1, p1 := create(t, r, Spec{Kind: KindLaunch, ClientID: "claude", LaunchID: "L1"})
	_, p2 := create(t, r, Spec{Kind: KindLaunch, ClientID: "claude", LaunchID: "L2"})
	_, pm := create(t, r, Spec{ClientID: "manual"})

	if s, err := r.Authenticate(p1.Reveal(), Scope{LaunchID: "L1"}); err != nil || s != s1 {
		t.Fatalf("own launch: %v, %v", s, err)
	}
	for name, p := range map[string]Pairing{"other launch": p2, "manual": pm} {
		if _, err := r.Authenticate(p.Reveal(), Scope{LaunchID: "L1"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s on L1's channel: %v, want ErrInvalid", name, err)
		}
		if _, err := r.Authenticate(p.Reveal(), Scope{}); err != nil {
			t.Errorf("%s on the shared listener: %v", name, err)
		}
	}
}

func TestIdleExpiry(t *testing.T) {
	clk := newFakeClock()
	var ended []Record
	r := open(t, Config{Now: clk.Now, IdleTimeout: 30 * time.Minute, OnEnd: func(rec Record) { ended = append(ended, rec) }})
	s, p := create(t, r, Spec{ClientID: "c"})
	l, lp := create(t, r, Spec{Kind: KindLaunch, ClientID: "claude", LaunchID: "L"})

	// Use slides the timeout.
	for range 3 {
		clk.Add(29 * time.Minute)
		if _, err := r.Authenticate(p.Reveal(), Scope{}); err != nil {
			t.Fatalf("used within the idle timeout: %v", err)
		}
	}
	clk.Add(30 * time.Minute)
	if err := r.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !isDone(s) || !errors.Is(context.Cause(s.Context()), ErrInvalid) {
		t.Fatal("expired session's context not done")
	}
	if _, err := r.Authenticate(p.Reveal(), Scope{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("expired session authenticated: %v", err)
	}
	if len(ended) != 1 || ended[0].ID != s.ID() || ended[0].State != StateExpired {
		t.Fatalf("OnEnd records = %+v", ended)
	}
	// A launch session lives as long as its box, used or not.
	if isDone(l) {
		t.Fatal("launch session expired")
	}
	if _, err := r.Authenticate(lp.Reveal(), Scope{}); err != nil {
		t.Fatal(err)
	}
}

// TestIdleExpiryOnAuthenticate guards expiry between sweeps: an idle session is refused at
// its next use even if no sweep ran.
func TestIdleExpiryOnAuthenticate(t *testing.T) {
	clk := newFakeClock()
	r := open(t, Config{Now: clk.Now})
	s, p := create(t, r, Spec{ClientID: "c"})
	clk.Add(DefaultIdleTimeout)
	if _, err := r.Authenticate(p.Reveal(), Scope{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Authenticate = %v", err)
	}
	if !isDone(s) || s.Record().State != StateExpired {
		t.Fatalf("state %s", s.Record().State)
	}
}

func TestHoldKeepsSessionAlive(t *testing.T) {
	clk := newFakeClock()
	r := open(t, Config{Now: clk.Now})
	s, p := create(t, r, Spec{ClientID: "c"})
	release := s.Hold()
	clk.Add(2 * DefaultIdleTimeout) // a long stream
	if err := r.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if isDone(s) {
		t.Fatal("session with a request in flight expired")
	}
	release()
	release()
	clk.Add(DefaultIdleTimeout - time.Minute)
	if _, err := r.Authenticate(p.Reveal(), Scope{}); err != nil {
		t.Fatalf("release did not count as a use: %v", err)
	}
}

// TestBackwardClockStepDoesNotRevive guards the clock: once expired, a session stays expired
// when the wall clock is stepped back, and a use after a backward step does not extend it.
func TestBackwardClockStepDoesNotRevive(t *testing.T) {
	t.Run("revive", func(t *testing.T) {
		clk := newFakeClock()
		r := open(t, Config{Now: clk.Now})
		_, p := create(t, r, Spec{ClientID: "c"})
		clk.Add(DefaultIdleTimeout + time.Minute)
		if err := r.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Add(-time.Hour)
		if _, err := r.Authenticate(p.Reveal(), Scope{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("expired session revived by a backward step: %v", err)
		}
	})
	t.Run("unobserved expiry", func(t *testing.T) {
		clk := newFakeClock()
		r := open(t, Config{Now: clk.Now})
		_, p := create(t, r, Spec{ClientID: "c"})
		_, other := create(t, r, Spec{ClientID: "c"})
		clk.Add(DefaultIdleTimeout + time.Minute)
		// Any observation of the time (here another session's use) fixes it as a lower bound.
		if _, err := r.Authenticate(other.Reveal(), Scope{}); err == nil {
			t.Fatal("other session should be idle too")
		}
		clk.Add(-time.Hour)
		if _, err := r.Authenticate(p.Reveal(), Scope{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("expired session revived by a backward step: %v", err)
		}
	})
	t.Run("extend", func(t *testing.T) {
		clk := newFakeClock()
		r := open(t, Config{Now: clk.Now})
		_, p := create(t, r, Spec{ClientID: "c"})
		clk.Add(20 * time.Minute)
		if _, err := r.Authenticate(p.Reveal(), Scope{}); err != nil {
			t.Fatal(err)
		}
		clk.Add(-20 * time.Minute) // back to creation time
		if _, err := r.Authenticate(p.Reveal(), Scope{}); err != nil {
			t.Fatal(err)
		}
		// The real last use was at +20m: the session expires at +50m by the latest time seen,
		// which the clock (now at +0) reaches again after 50 minutes.
		clk.Add(50 * time.Minute)
		if _, err := r.Authenticate(p.Reveal(), Scope{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("backward step extended the session: %v", err)
		}
	})
	t.Run("across restart", func(t *testing.T) {
		clk := newFakeClock()
		mem := &MemPersister{}
		r := open(t, Config{Now: clk.Now, Persister: mem})
		_, p := create(t, r, Spec{ClientID: "c"})
		clk.Add(DefaultIdleTimeout + time.Minute)
		if err := r.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Add(-time.Hour) // the restarted daemon sees an earlier wall clock
		r2 := open(t, Config{Now: clk.Now, Persister: mem})
		if _, err := r2.Authenticate(p.Reveal(), Scope{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("expired session revived across a restart: %v", err)
		}
	})
}

func TestRevoke(t *testing.T) {
	mem := &MemPersister{}
	r := open(t, Config{Persister: mem})
	s, p := create(t, r, Spec{Kind: KindLaunch, ClientID: "claude", LaunchID: "L"})
	if err := r.Revoke(context.Background(), s.ID()); err != nil {
		t.Fatal(err)
	}
	if !isDone(s) {
		t.Fatal("revoked session's context not done")
	}
	if cause := context.Cause(s.Context()); !errors.Is(cause, ErrInvalid) || !strings.Contains(cause.Error(), "revoked") {
		t.Fatalf("cause = %v", cause)
	}
	if _, err := r.Authenticate(p.Reveal(), Scope{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("revoked session authenticated: %v", err)
	}
	if err := r.Revoke(context.Background(), s.ID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Revoke = %v", err)
	}
	recs, _ := mem.LoadSessions(context.Background())
	if len(recs) != 1 || recs[0].State != StateRevoked || recs[0].Ended.IsZero() {
		t.Fatalf("stored = %+v", recs)
	}
	// Revocation is permanent: a restarted registry does not bring it back.
	r2 := open(t, Config{Persister: mem})
	if _, err := r2.Authenticate(p.Reveal(), Scope{}); !errors.Is(err, ErrInvalid) || r2.Len() != 0 {
		t.Fatalf("revoked session restored: %v, %d live", err, r2.Len())
	}
}

func TestRevokePersistFailureStillRevokes(t *testing.T) {
	mem := &MemPersister{}
	r := open(t, Config{Persister: mem})
	s, p := create(t, r, Spec{ClientID: "c"})
	mem.Fail = errors.New("disk full")
	if err := r.Revoke(context.Background(), s.ID()); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Revoke = %v", err)
	}
	if _, err := r.Authenticate(p.Reveal(), Scope{}); !errors.Is(err, ErrInvalid) {
		t.Fatal("session usable after a revocation whose persisting failed")
	}
}

func TestCreatePersistFailure(t *testing.T) {
	mem := &MemPersister{Fail: errors.New("disk full")}
	r := open(t, Config{Persister: &MemPersister{}})
	r.cfg.Persister = mem
	if _, _, err := r.Create(context.Background(), Spec{ClientID: "c"}); err == nil {
		t.Fatal("Create succeeded without persisting")
	}
	if r.Len() != 0 {
		t.Fatal("unpersisted session left live")
	}
}

func TestPersistenceRoundTrip(t *testing.T) {
	clk := newFakeClock()
	mem := &MemPersister{}
	r := open(t, Config{Now: clk.Now, Persister: mem})
	ls, lp := create(t, r, Spec{Kind: KindLaunch, ClientID: "claude", LaunchID: "L1"})
	ms, mp := create(t, r, Spec{ClientID: "manual"})
	gone, gp := create(t, r, Spec{Kind: KindLaunch, ClientID: "claude", LaunchID: "L2"})
	idle, ip := create(t, r, Spec{ClientID: "manual"})
	if err := r.EndLaunch(context.Background(), "L2"); err != nil {
		t.Fatal(err)
	}
	clk.Add(20 * time.Minute)
	if _, err := r.Authenticate(mp.Reveal(), Scope{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The daemon restarts 15 minutes later: the idle manual session (35 minutes) is gone, the
	// used one (15 minutes) is back with its last use, the launch session is back.
	clk.Add(15 * time.Minute)
	r2 := open(t, Config{Now: clk.Now, Persister: mem})
	for _, c := range []struct {
		s    *Session
		p    Pairing
		live bool
	}{{ls, lp, true}, {ms, mp, true}, {gone, gp, false}, {idle, ip, false}} {
		s2, err := r2.Authenticate(c.p.Reveal(), Scope{})
		if !c.live {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s restored", c.s.ID())
			}
			continue
		}
		if err != nil {
			t.Errorf("%s not restored: %v", c.s.ID(), err)
			continue
		}
		want, got := c.s.Record(), s2.Record()
		if got.ID != want.ID || got.Hash != want.Hash || got.ClientID != want.ClientID ||
			got.LaunchID != want.LaunchID || got.Kind != want.Kind || !got.Created.Equal(want.Created) {
			t.Errorf("restored %+v, want %+v", got, want)
		}
	}
	recs, _ := mem.LoadSessions(context.Background())
	if len(recs) != 2 {
		t.Fatalf("store holds %d records after restart, want 2: %+v", len(recs), recs)
	}
}

// TestCreateUnsaved guards Spec.Unsaved: the session is live at once, nothing is persisted
// until its caller saves it (a restart before that forgets it), and a revocation meanwhile is
// persisted, so that the caller's save cannot bring it back (the store keeps it: internal/store
// TestCreateLaunchWithSession).
func TestCreateUnsaved(t *testing.T) {
	ctx := context.Background()
	mem := &MemPersister{}
	r := open(t, Config{Persister: mem})
	s, p := create(t, r, Spec{Kind: KindLaunch, ClientID: "claude", LaunchID: "L1", Unsaved: true})
	if recs, _ := mem.LoadSessions(ctx); len(recs) != 0 {
		t.Fatalf("an unsaved session was persisted: %+v", recs)
	}
	if _, err := r.Authenticate(p.Reveal(), Scope{LaunchID: "L1"}); err != nil {
		t.Fatalf("an unsaved session is not live: %v", err)
	}
	if _, err := open(t, Config{Persister: mem}).Authenticate(p.Reveal(), Scope{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a restart brought back an unsaved session: %v", err)
	}
	if err := r.Revoke(ctx, s.ID()); err != nil {
		t.Fatal(err)
	}
	recs, _ := mem.LoadSessions(ctx)
	if len(recs) != 1 || recs[0].State != StateRevoked {
		t.Fatalf("the revocation of an unsaved session was not persisted: %+v", recs)
	}
}

func TestOpenLoadFailure(t *testing.T) {
	if _, err := Open(context.Background(), Config{Persister: &MemPersister{Fail: errors.New("locked")}}); err == nil {
		t.Fatal("Open succeeded without its sessions")
	}
}
