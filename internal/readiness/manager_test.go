package readiness_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/readiness"
)

// fakeProbe answers probes from a script: each call takes the next result (the last repeats);
// release, when set, holds every call until it is closed.
type fakeProbe struct {
	mu      sync.Mutex
	results []*readiness.Error
	calls   atomic.Int32
	release chan struct{}
}

func (f *fakeProbe) probe(ctx context.Context, o readiness.ProbeOptions) *readiness.Result {
	n := int(f.calls.Add(1))
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.results[min(n, len(f.results))-1]
	return &readiness.Result{Engine: o.Engine, Err: err, Started: time.Now(),
		Facts: []api.Fact{{Name: "attestation", OK: err == nil, Detail: "fake"}}}
}

var errUserNS = &readiness.Error{Reason: readiness.ReasonUserNSUnavailable, Detail: "clone: no space left on device"}

func newManager(t *testing.T, f *fakeProbe, state string, cfg *atomic.Value) *readiness.Manager {
	t.Helper()
	o := readiness.Options{RuntimeDir: t.TempDir(), StateDir: state, Probe: f.probe,
		RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, AdmitWait: time.Minute}
	if cfg != nil {
		o.Config = func() config.Config { return cfg.Load().(config.Config) }
	}
	return readiness.NewManager(o)
}

func start(t *testing.T, m *readiness.Manager) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	m.Start(ctx)
	return ctx
}

func TestManagerFirstLaunchWaitsForTheFirstProbe(t *testing.T) {
	f := &fakeProbe{results: []*readiness.Error{nil}, release: make(chan struct{})}
	m := newManager(t, f, "", nil)
	if st := m.Status(); st.State != api.ReadinessUnknown {
		t.Fatalf("initial state %s", st.State)
	}
	ctx := start(t, m)
	admitted := make(chan error, 1)
	go func() { admitted <- m.Admit(ctx) }()
	if _, err := m.Wait(ctx, func(r api.Readiness) bool { return r.State == api.ReadinessProbing }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-admitted:
		t.Fatalf("Admit returned %v while the first probe runs", err)
	default:
	}
	close(f.release)
	if err := <-admitted; err != nil {
		t.Fatalf("Admit after a successful first probe = %v", err)
	}
}

func TestManagerRefusesThenRecoversWithoutRestart(t *testing.T) {
	f := &fakeProbe{results: []*readiness.Error{errUserNS, errUserNS, nil}}
	m := newManager(t, f, t.TempDir(), nil)
	ctx := start(t, m)
	st, err := m.Wait(ctx, func(r api.Readiness) bool { return r.State == api.ReadinessUnavailable })
	if err != nil {
		t.Fatal(err)
	}
	if st.Reason != string(readiness.ReasonUserNSUnavailable) || st.Hint != readiness.ReasonUserNSUnavailable.Hint() || st.NextRetry.IsZero() {
		t.Errorf("unavailable state %+v", st)
	}
	err = m.Admit(ctx)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeBoxUnavailable || ae.Hint == "" {
		t.Fatalf("Admit while unavailable = %v", err)
	}
	st, err = m.Wait(ctx, func(r api.Readiness) bool { return r.State == api.ReadinessReady })
	if err != nil {
		t.Fatal(err)
	}
	if st.Attempts != 3 || st.Cached {
		t.Errorf("ready state %+v: want the third probe of this manager", st)
	}
	if err := m.Admit(ctx); err != nil {
		t.Fatalf("Admit once ready = %v", err)
	}
}

func TestManagerCachesOnlyPositiveResults(t *testing.T) {
	state := t.TempDir()
	cfg := &atomic.Value{}
	cfg.Store(config.Config{})

	bad := &fakeProbe{results: []*readiness.Error{errUserNS}}
	m := newManager(t, bad, state, cfg)
	ctx := start(t, m)
	if _, err := m.Wait(ctx, func(r api.Readiness) bool { return r.State == api.ReadinessUnavailable }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(state, readiness.CacheFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a negative result was cached: %v", err)
	}

	good := &fakeProbe{results: []*readiness.Error{nil}}
	m = newManager(t, good, state, cfg)
	ctx = start(t, m)
	if _, err := m.Wait(ctx, func(r api.Readiness) bool { return r.State == api.ReadinessReady }); err != nil {
		t.Fatal(err)
	}

	// A new manager (a restarted daemon) with the same configuration, kernel and binary is
	// ready from the cache without probing, and admits at once.
	never := &fakeProbe{results: []*readiness.Error{errUserNS}}
	m = newManager(t, never, state, cfg)
	ctx = start(t, m)
	st, err := m.Wait(ctx, func(r api.Readiness) bool { return r.State == api.ReadinessReady })
	if err != nil || !st.Cached || len(st.Facts) == 0 {
		t.Fatalf("cached state %+v, %v", st, err)
	}
	if err := m.Admit(ctx); err != nil {
		t.Fatalf("Admit with a cached proof = %v", err)
	}
	if n := never.calls.Load(); n != 0 {
		t.Fatalf("a cached proof was probed again (%d probes)", n)
	}

	// A configuration change invalidates the proof: the next admission waits for a new probe,
	// which here fails.
	cfg.Store(config.Config{Egress: config.EgressAllow})
	err = m.Admit(ctx)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeBoxUnavailable {
		t.Fatalf("Admit after a configuration change = %v", err)
	}
	if never.calls.Load() == 0 {
		t.Fatal("a configuration change did not probe again")
	}
}

func TestManagerProbeTimeoutReason(t *testing.T) {
	f := &fakeProbe{results: []*readiness.Error{nil}, release: make(chan struct{})} // never released
	o := readiness.Options{RuntimeDir: t.TempDir(), Probe: f.probe, ProbeTimeout: time.Millisecond, RetryMin: time.Hour}
	m := readiness.NewManager(o)
	ctx := start(t, m)
	st, err := m.Wait(ctx, func(r api.Readiness) bool { return r.State == api.ReadinessUnavailable })
	if err != nil || st.Reason != string(readiness.ReasonProbeTimeout) {
		t.Fatalf("state %+v, %v", st, err)
	}
}
