package readiness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
)

// Defaults for zero Options fields.
const (
	DefaultProbeTimeout = 30 * time.Second
	DefaultAdmitWait    = 10 * time.Second
	DefaultRetryMin     = 2 * time.Second
	DefaultRetryMax     = 5 * time.Minute
)

// Options configure a Manager. RuntimeDir is required; every other zero value works.
type Options struct {
	// Config returns the configuration launches currently run under (its engine is the one
	// probed, its hash part of the cache key); nil means config.Defaults.
	Config func() config.Config
	// RuntimeDir is agentbox's owner-checked runtime directory (probe lock, probe directories).
	RuntimeDir string
	// StateDir holds the positive-result cache; "" disables it.
	StateDir string
	// Executable is the agentbox binary boxes run; "" means the running executable.
	Executable string
	// Helper is the box helper (agentbox-box) shims run from, "" when they run from
	// Executable; its identity is part of the cache key.
	Helper string
	// HelperID, when set, identifies what shims run instead of Helper's file identity: the
	// digest of the sealed copy of Helper the daemon took at its start (the file on disk may
	// change since without changing what runs; a daemon restarted on the same file takes an
	// equal copy and keeps the cached proof).
	HelperID string
	// Logger receives state changes; nil discards them.
	Logger *slog.Logger
	// ProbeTimeout bounds one probe; 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// AdmitWait bounds how long Admit waits for the first probe of a configuration, kernel
	// and binary; 0 means DefaultAdmitWait.
	AdmitWait time.Duration
	// RetryMin and RetryMax bound the backoff between probes of an unavailable host (doubling,
	// with jitter); 0 means DefaultRetryMin and DefaultRetryMax.
	RetryMin, RetryMax time.Duration
	// Probe runs one probe; nil means Probe. Tests substitute it.
	Probe func(ctx context.Context, o ProbeOptions) *Result
}

// Manager is the readiness state machine of a daemon. Use NewManager, then Start.
type Manager struct {
	o   Options
	log *slog.Logger
	exe string

	kick chan struct{}

	mu       sync.Mutex
	st       api.Readiness
	key      Key           // what st was established for
	changed  chan struct{} // closed and replaced at every change of st
	attempts int
}

// NewManager returns a manager in the unknown state.
func NewManager(o Options) *Manager {
	m := &Manager{o: o, log: o.Logger, kick: make(chan struct{}, 1), changed: make(chan struct{})}
	if m.log == nil {
		m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.o.Probe == nil {
		m.o.Probe = Probe
	}
	m.exe = o.Executable
	if m.exe == "" {
		m.exe = "/proc/self/exe"
	}
	m.st = api.Readiness{State: api.ReadinessUnknown, Engine: m.config().WithDefaults().Engine, Since: time.Now()}
	return m
}

func (m *Manager) config() config.Config {
	if m.o.Config == nil {
		return config.Defaults()
	}
	return m.o.Config().WithDefaults()
}

func (m *Manager) currentKey() Key {
	c := m.config()
	return currentKey(c.Engine, ConfigHash(c), m.exe, m.o.Helper, m.o.HelperID)
}

// Start runs the state machine until ctx ends: a cached proof for the current key makes the
// state ready at once; otherwise a probe runs in the background. It does not block.
func (m *Manager) Start(ctx context.Context) {
	go m.loop(ctx)
}

func (m *Manager) loop(ctx context.Context) {
	rmin, rmax := m.o.RetryMin, m.o.RetryMax
	if rmin <= 0 {
		rmin = DefaultRetryMin
	}
	if rmax <= 0 {
		rmax = DefaultRetryMax
	}
	timeout := m.o.ProbeTimeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	backoff := rmin
	for {
		cfg := m.config()
		key := currentKey(cfg.Engine, ConfigHash(cfg), m.exe, m.o.Helper, m.o.HelperID)
		var retry <-chan time.Time
		if r, ok := loadCache(m.o.StateDir, key); ok {
			r.Cached = true
			r.Since = time.Now()
			r.NextRetry = time.Time{}
			m.set(*r, key)
			backoff = rmin
			m.log.Info("readiness: ready (cached proof)", "engine", key.Engine, "probed", r.ProbedAt)
		} else {
			m.mu.Lock()
			first := m.st.State != api.ReadinessUnavailable || m.key != key
			m.mu.Unlock()
			if first {
				m.set(api.Readiness{State: api.ReadinessProbing, Engine: cfg.Engine, Since: time.Now()}, key)
			}
			pctx, cancel := context.WithTimeout(ctx, timeout)
			exe := m.o.Executable
			if exe == "" {
				exe, _ = os.Executable()
			}
			res := m.o.Probe(pctx, ProbeOptions{Engine: cfg.Engine, Config: cfg, RuntimeDir: m.o.RuntimeDir, Executable: exe, Logger: m.log})
			if res.Err == nil && pctx.Err() != nil {
				res.Err = failf(ReasonProbeTimeout, "the probe did not finish within %v", timeout)
			}
			cancel()
			if ctx.Err() != nil {
				return
			}
			st := res.Readiness()
			m.mu.Lock()
			m.attempts++
			st.Attempts = m.attempts
			m.mu.Unlock()
			if res.OK() {
				backoff = rmin
				if err := storeCache(m.o.StateDir, key, st); err != nil {
					m.log.Warn("readiness: cache the proof", "err", err)
				}
				m.log.Info("readiness: ready", "engine", cfg.Engine, "probe", res.Duration.Round(time.Millisecond))
			} else {
				if err := dropCache(m.o.StateDir); err != nil {
					m.log.Warn("readiness: drop the cached proof", "err", err)
				}
				wait := jitter(backoff)
				st.NextRetry = time.Now().Add(wait)
				retry = time.After(wait)
				backoff = min(2*backoff, rmax)
				m.log.Warn("readiness: boxes unavailable", "engine", cfg.Engine, "reason", st.Reason, "detail", st.Detail,
					"hint", st.Hint, "retry", wait.Round(time.Millisecond))
			}
			m.set(st, key)
		}
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-retry:
		}
	}
}

// jitter spreads d by ±10%, so that daemons of many users do not probe in step.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()-0.5)*0.2*float64(d))
}

func (m *Manager) set(st api.Readiness, key Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st, m.key = st, key
	close(m.changed)
	m.changed = make(chan struct{})
}

// Status returns the current state.
func (m *Manager) Status() api.Readiness {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

// Wait blocks until cond holds for the state, or ctx ends.
func (m *Manager) Wait(ctx context.Context, cond func(api.Readiness) bool) (api.Readiness, error) {
	for {
		m.mu.Lock()
		st, ch := m.st, m.changed
		m.mu.Unlock()
		if cond(st) {
			return st, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}

// Reprobe asks for a probe now (a state established for another key is probed again anyway).
func (m *Manager) Reprobe() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Admit decides whether a launch may start: nil in the ready state (for the current
// configuration, kernel and binary), otherwise a *api.Error with code box_unavailable, the
// reason and the hint. A launch that arrives while the first probe of the current key runs
// waits for it, up to Options.AdmitWait. Admit does no probe work itself: it compares the
// current key with the proven one, which costs a few reads of /proc.
func (m *Manager) Admit(ctx context.Context) error {
	wait := m.o.AdmitWait
	if wait <= 0 {
		wait = DefaultAdmitWait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		m.mu.Lock()
		st, key, ch := m.st, m.key, m.changed
		m.mu.Unlock()
		current := m.currentKey()
		switch {
		case key != current && (st.State == api.ReadinessReady || st.State == api.ReadinessUnavailable):
			// The configuration, kernel or binary changed since the proof: probe again and
			// wait for it like for a first probe.
			m.Reprobe()
		case st.State == api.ReadinessReady:
			return nil
		case st.State == api.ReadinessUnavailable:
			return refusal(st)
		}
		select {
		case <-ch:
		case <-timer.C:
			st := m.Status()
			if st.State == api.ReadinessReady && m.currentKey() == m.key {
				return nil
			}
			if st.State == api.ReadinessUnavailable {
				return refusal(st)
			}
			return &api.Error{Code: api.CodeBoxUnavailable,
				Message: fmt.Sprintf("boxes are not available yet: the readiness probe is still running after %v", wait),
				Hint:    "try again in a moment; `agentbox doctor` shows the probe"}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func refusal(st api.Readiness) error {
	return &api.Error{Code: api.CodeBoxUnavailable,
		Message: fmt.Sprintf("this host cannot build the box (%s): %s", st.Reason, st.Detail), Hint: st.Hint}
}
