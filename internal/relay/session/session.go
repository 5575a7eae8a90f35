// Package session is the relay's pairing registry: it creates per-session pairings (bearer
// secrets worthless outside the daemon's brokers), keeps only their SHA-256 hashes, checks
// presented pairings in constant time, bounds the number of live sessions, expires idle manual
// sessions, revokes sessions permanently, and persists hashes and metadata through a Persister
// so that a daemon restart keeps live sessions and never brings back revoked ones.
package session

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults applied to zero Config fields.
const (
	DefaultMax           = 64
	DefaultIdleTimeout   = 30 * time.Minute
	DefaultSweepInterval = 60 * time.Second
)

// Kind says how long a session lives.
type Kind string

const (
	// KindManual sessions are created by hand (`agentbox session create`) and expire after
	// Config.IdleTimeout without use.
	KindManual Kind = "manual"
	// KindLaunch sessions belong to one launch and live exactly as long as its box: the
	// daemon ends them (End, EndLaunch). They never expire on their own.
	KindLaunch Kind = "launch"
)

// State is where a session is in its life. Only StateLive admits requests; every other state
// is final.
type State string

const (
	StateLive    State = "live"
	StateEnded   State = "ended"
	StateExpired State = "expired"
	StateRevoked State = "revoked"
)

// Record is what is stored of a session: its hash and metadata, never the pairing.
type Record struct {
	ID       string // "s_" and 16 hex digits; not a secret
	Hash     Hash   // SHA-256 of the pairing
	ClientID string // the program profile id for launch sessions
	LaunchID string // empty for manual sessions
	Kind     Kind
	State    State
	Created  time.Time
	LastUsed time.Time
	Ended    time.Time // zero while live
}

// Persister stores session records. It is implemented by the daemon's store; MemPersister is
// an in-memory one for tests. LoadSessions returns every stored record; the registry restores
// only live ones, so a revoked record stays revoked across restarts.
type Persister interface {
	SaveSession(ctx context.Context, r Record) error
	DeleteSession(ctx context.Context, id string) error
	LoadSessions(ctx context.Context) ([]Record, error)
}

// Config configures a Registry. Its zero value is usable: in-memory, 64 sessions, 30 minutes
// of idle time for manual sessions, every client admitted.
type Config struct {
	// Max bounds the live sessions, launch sessions included (sessions.max). Zero means
	// DefaultMax.
	Max int
	// IdleTimeout is how long a manual session lives without use (sessions.idleTimeout). Zero
	// means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// SweepInterval is how often Run sweeps idle sessions. Zero means DefaultSweepInterval.
	SweepInterval time.Duration
	// AllowedClients, when not empty, lists the client ids that may create sessions
	// (sessions.allowedClients). Empty admits every client id.
	AllowedClients []string
	// Persister stores records. Nil keeps sessions in memory only.
	Persister Persister
	// Now returns the current time. Nil means time.Now (whose monotonic reading makes idle
	// time immune to wall-clock steps).
	Now func() time.Time
	// OnEnd, when set, is called (outside the registry's lock) with the final record of every
	// session that stops being live: ended, expired or revoked.
	OnEnd func(Record)
	// Logf logs errors the registry cannot return (persistence failures during a sweep). Nil
	// means log.Printf.
	Logf func(format string, args ...any)
}

// Spec describes a session to create.
type Spec struct {
	// Kind is the session's kind. Zero means KindManual.
	Kind Kind
	// ClientID names the client: the program profile id for a launch. Required.
	ClientID string
	// LaunchID is the launch the session belongs to: required for KindLaunch, refused for
	// KindManual.
	LaunchID string
	// Unsaved, for a KindLaunch session, leaves its first save to the caller: Create does not
	// call the Persister, and the caller saves Session.Record in a transaction of its own
	// before anything can present the pairing (the daemon: with the launch's record, which
	// its box's program waits for; one commit instead of two on the launch's path), never
	// overwriting a record saved meanwhile (a revocation). Unsaved, the session lives in the
	// registry only, and a daemon restart forgets it (fail closed). Later changes (revoked,
	// ended, last use) are persisted as for any session.
	// Refused for KindManual, whose pairing Create's caller hands out at once.
	Unsaved bool
}

// Scope narrows which sessions Authenticate admits. The zero Scope admits every live session
// (the shared host loopback listener used with `egress: allow`).
type Scope struct {
	// LaunchID, when set, admits only the sessions of that launch (a launch's own relay
	// channel).
	LaunchID string
}

// Session is one live or finished session. Its methods are safe for concurrent use.
type Session struct {
	reg      *Registry
	id       string
	hash     Hash
	clientID string
	launchID string
	kind     Kind
	created  time.Time
	ctx      context.Context
	cancel   context.CancelCauseFunc

	// Guarded by reg.mu.
	state    State
	lastUsed time.Time
	ended    time.Time
	inUse    int
	dirty    bool // lastUsed changed since the last save
}

// ID returns the session's id (not a secret).
func (s *Session) ID() string { return s.id }

// ClientID returns the client id the session was created for.
func (s *Session) ClientID() string { return s.clientID }

// LaunchID returns the launch the session belongs to, empty for a manual session.
func (s *Session) LaunchID() string { return s.launchID }

// Kind returns the session's kind.
func (s *Session) Kind() Kind { return s.kind }

// Context returns a context that is cancelled when the session stops being live (ended,
// expired or revoked); its cause wraps ErrInvalid and names the state. Brokers derive the
// contexts of in-flight requests from it so that revocation cancels them.
func (s *Session) Context() context.Context { return s.ctx }

// Done is Context().Done().
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Record returns a snapshot of the session's record.
func (s *Session) Record() Record {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	return s.recordLocked()
}

func (s *Session) recordLocked() Record {
	return Record{
		ID:       s.id,
		Hash:     s.hash,
		ClientID: s.clientID,
		LaunchID: s.launchID,
		Kind:     s.kind,
		State:    s.state,
		Created:  s.created.Round(0),
		LastUsed: s.lastUsed.Round(0),
		Ended:    s.ended.Round(0),
	}
}

// Hold marks one request in flight on the session until release is called: a manual session
// does not expire while it holds a request (a long stream is not idleness), and release counts
// as a use. Calling release more than once is harmless.
func (s *Session) Hold() (release func()) {
	r := s.reg
	r.mu.Lock()
	s.inUse++
	r.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			s.inUse--
			if s.state == StateLive {
				s.lastUsed = r.nowLocked()
				s.dirty = true
			}
		})
	}
}

// Registry holds the sessions. Create one with Open.
type Registry struct {
	cfg Config

	mu     sync.Mutex
	byID   map[string]*Session
	byHash map[Hash]*Session
	high   time.Time // the latest time observed: the clock never runs backwards for us
}

// Open returns a registry and restores the live sessions cfg.Persister holds. Manual sessions
// idle for longer than the idle timeout are dropped (and deleted) instead of restored; launch
// sessions are restored as they were, and the daemon ends those whose box did not survive.
func Open(ctx context.Context, cfg Config) (*Registry, error) {
	if cfg.Max == 0 {
		cfg.Max = DefaultMax
	}
	if cfg.Max < 0 {
		return nil, fmt.Errorf("sessions.max is %d: must be positive", cfg.Max)
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("sessions.idleTimeout is %s: must be positive", cfg.IdleTimeout)
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logf == nil {
		cfg.Logf = log.Printf
	}
	r := &Registry{cfg: cfg, byID: map[string]*Session{}, byHash: map[Hash]*Session{}}
	if cfg.Persister == nil {
		return r, nil
	}
	recs, err := cfg.Persister.LoadSessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("load sessions: %w", err)
	}
	// Stored times bound the clock from below: a clock stepped back across a restart must not
	// make a session idle for less time than it already was.
	for _, rec := range recs {
		for _, t := range []time.Time{rec.Created, rec.LastUsed, rec.Ended} {
			if t.After(r.high) {
				r.high = t
			}
		}
	}
	now := r.nowLocked()
	var stale []string
	for _, rec := range recs {
		if rec.State != StateLive || r.byID[rec.ID] != nil || r.byHash[rec.Hash] != nil {
			continue
		}
		if rec.Kind == KindManual && !now.Before(rec.LastUsed.Add(cfg.IdleTimeout)) {
			stale = append(stale, rec.ID)
			continue
		}
		if rec.Kind != KindManual && rec.Kind != KindLaunch {
			continue
		}
		s := r.newSession(rec)
		r.byID[s.id] = s
		r.byHash[s.hash] = s
	}
	for _, id := range stale {
		if err := cfg.Persister.DeleteSession(ctx, id); err != nil {
			cfg.Logf("relay sessions: delete expired session %s: %v", id, err)
		}
	}
	return r, nil
}

func (r *Registry) newSession(rec Record) *Session {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Session{
		reg:      r,
		id:       rec.ID,
		hash:     rec.Hash,
		clientID: rec.ClientID,
		launchID: rec.LaunchID,
		kind:     rec.Kind,
		created:  rec.Created,
		ctx:      ctx,
		cancel:   cancel,
		state:    StateLive,
		lastUsed: rec.LastUsed,
	}
}

// nowLocked returns the current time, never earlier than a time it returned before: a
// backward clock step can neither extend nor revive a session. With time.Now the monotonic
// reading already guarantees this; the high-water mark covers injected clocks and wall times
// restored from the store.
func (r *Registry) nowLocked() time.Time {
	t := r.cfg.Now()
	if t.Before(r.high) {
		return r.high
	}
	r.high = t
	return t
}

// Create creates a session and returns it with its pairing. The pairing is returned only
// here, once; the registry and the Persister keep only its hash. Create refuses with
// ErrTooManySessions beyond Config.Max live sessions and with ErrClientNotAllowed for a client
// id outside Config.AllowedClients. The record is persisted before Create returns (unless
// spec.Unsaved: then by the caller); if that fails, the session is not created.
func (r *Registry) Create(ctx context.Context, spec Spec) (*Session, Pairing, error) {
	if spec.Kind == "" {
		spec.Kind = KindManual
	}
	switch {
	case spec.Kind != KindManual && spec.Kind != KindLaunch:
		return nil, "", fmt.Errorf("create session: unknown kind %q", spec.Kind)
	case spec.ClientID == "":
		return nil, "", errors.New("create session: no client id")
	case spec.Kind == KindLaunch && spec.LaunchID == "":
		return nil, "", errors.New("create session: a launch session needs a launch id")
	case spec.Kind == KindManual && spec.LaunchID != "":
		return nil, "", errors.New("create session: a manual session has no launch id")
	case spec.Kind == KindManual && spec.Unsaved:
		return nil, "", errors.New("create session: a manual session is saved before its pairing is handed out")
	}
	if len(r.cfg.AllowedClients) > 0 && !slices.Contains(r.cfg.AllowedClients, spec.ClientID) {
		return nil, "", fmt.Errorf("create session: %w: %q is not in sessions.allowedClients (%v)",
			ErrClientNotAllowed, spec.ClientID, r.cfg.AllowedClients)
	}
	p, h := newPairing()

	r.mu.Lock()
	if len(r.byID) >= r.cfg.Max {
		n := len(r.byID)
		r.mu.Unlock()
		return nil, "", fmt.Errorf("create session: %w: %d sessions are live and the limit is %d (sessions.max); end or revoke a session, or raise sessions.max",
			ErrTooManySessions, n, r.cfg.Max)
	}
	now := r.nowLocked()
	s := r.newSession(Record{
		ID: newID(), Hash: h, ClientID: spec.ClientID, LaunchID: spec.LaunchID,
		Kind: spec.Kind, Created: now, LastUsed: now,
	})
	r.byID[s.id] = s
	r.byHash[s.hash] = s
	rec := s.recordLocked()
	r.mu.Unlock()

	if r.cfg.Persister != nil && !spec.Unsaved {
		if err := r.cfg.Persister.SaveSession(ctx, rec); err != nil {
			r.mu.Lock()
			r.retireLocked(s, StateEnded)
			r.mu.Unlock()
			return nil, "", fmt.Errorf("create session: persist %s: %w", s.id, err)
		}
	}
	return s, p, nil
}

// Authenticate returns the live session whose pairing is pairing, if scope admits it, and
// counts the call as a use. Every refusal is ErrInvalid, whatever its reason.
func (r *Registry) Authenticate(pairing string, scope Scope) (*Session, error) {
	if !WellFormed(pairing) {
		return nil, ErrInvalid
	}
	h := HashOf(pairing)
	r.mu.Lock()
	s := r.byHash[h]
	if s == nil || subtle.ConstantTimeCompare(s.hash[:], h[:]) != 1 {
		r.mu.Unlock()
		return nil, ErrInvalid
	}
	now := r.nowLocked()
	if r.idleLocked(s, now) {
		rec := r.retireLocked(s, StateExpired)
		r.mu.Unlock()
		r.finish(context.Background(), rec) // errors are logged there
		return nil, ErrInvalid
	}
	if scope.LaunchID != "" && s.launchID != scope.LaunchID {
		r.mu.Unlock()
		return nil, ErrInvalid
	}
	s.lastUsed = now
	s.dirty = true
	r.mu.Unlock()
	return s, nil
}

func (r *Registry) idleLocked(s *Session, now time.Time) bool {
	return s.kind == KindManual && s.inUse == 0 && !now.Before(s.lastUsed.Add(r.cfg.IdleTimeout))
}

// retireLocked moves s to a final state and cancels its context. State changes before the
// cancellation, so whoever sees the context done also sees the session refused.
func (r *Registry) retireLocked(s *Session, st State) Record {
	s.state = st
	s.ended = r.nowLocked()
	delete(r.byID, s.id)
	delete(r.byHash, s.hash)
	s.cancel(fmt.Errorf("%w: session %s %s", ErrInvalid, s.id, st))
	return s.recordLocked()
}

// finish persists a retired session's final state and reports it: a revoked record is saved
// (revocation is permanent), an ended or expired one deleted.
func (r *Registry) finish(ctx context.Context, rec Record) error {
	var err error
	if p := r.cfg.Persister; p != nil {
		if rec.State == StateRevoked {
			err = p.SaveSession(ctx, rec)
		} else {
			err = p.DeleteSession(ctx, rec.ID)
		}
		if err != nil {
			err = fmt.Errorf("persist %s session %s: %w", rec.State, rec.ID, err)
			r.cfg.Logf("relay sessions: %v", err)
		}
	}
	if r.cfg.OnEnd != nil {
		r.cfg.OnEnd(rec)
	}
	return err
}

// Get returns the live session with the given id.
func (r *Registry) Get(id string) (*Session, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.byID[id]
	return s, ok
}

// OfLaunch returns the live session of launch launchID, or nil. (A launch has at most one.)
func (r *Registry) OfLaunch(launchID string) *Session {
	if launchID == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.byID {
		if s.launchID == launchID {
			return s
		}
	}
	return nil
}

// List returns the records of the live sessions, sorted by creation time.
func (r *Registry) List() []Record {
	r.mu.Lock()
	out := make([]Record, 0, len(r.byID))
	for _, s := range r.byID {
		out = append(out, s.recordLocked())
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Record) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Len returns the number of live sessions.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}

// Revoke revokes the live session id: its next request is refused, its context is cancelled
// (which cancels its in-flight requests), and the revocation is persisted so that it
// survives a restart. The session is refused from the moment Revoke is called even if
// persisting fails; the error says so.
func (r *Registry) Revoke(ctx context.Context, id string) error {
	return r.retire(ctx, id, StateRevoked)
}

// End ends the live session id (its launch's box is gone, or the user ended it).
func (r *Registry) End(ctx context.Context, id string) error {
	return r.retire(ctx, id, StateEnded)
}

func (r *Registry) retire(ctx context.Context, id string, st State) error {
	r.mu.Lock()
	s := r.byID[id]
	if s == nil {
		r.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	rec := r.retireLocked(s, st)
	r.mu.Unlock()
	return r.finish(ctx, rec)
}

// EndLaunch ends every live session of launch launchID. It is not an error if there is none.
func (r *Registry) EndLaunch(ctx context.Context, launchID string) error {
	if launchID == "" {
		return errors.New("end launch sessions: no launch id")
	}
	r.mu.Lock()
	var recs []Record
	for _, s := range r.byID {
		if s.launchID == launchID {
			recs = append(recs, r.retireLocked(s, StateEnded))
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, rec := range recs {
		errs = append(errs, r.finish(ctx, rec))
	}
	return errors.Join(errs...)
}

// Sweep expires the manual sessions idle for at least the idle timeout and persists the
// last-use time of the sessions used since the previous sweep.
func (r *Registry) Sweep(ctx context.Context) error {
	r.mu.Lock()
	now := r.nowLocked()
	var expired, used []Record
	for _, s := range r.byID {
		if r.idleLocked(s, now) {
			expired = append(expired, r.retireLocked(s, StateExpired))
			continue
		}
		if s.dirty {
			s.dirty = false
			used = append(used, s.recordLocked())
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, rec := range expired {
		errs = append(errs, r.finish(ctx, rec))
	}
	if p := r.cfg.Persister; p != nil {
		for _, rec := range used {
			if err := p.SaveSession(ctx, rec); err != nil {
				errs = append(errs, fmt.Errorf("persist session %s: %w", rec.ID, err))
				r.markDirty(rec.ID)
			}
		}
	}
	return errors.Join(errs...)
}

func (r *Registry) markDirty(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.byID[id]; s != nil {
		s.dirty = true
	}
}

// Run sweeps every Config.SweepInterval until ctx is done, logging sweep errors.
func (r *Registry) Run(ctx context.Context) {
	t := time.NewTicker(r.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Sweep(ctx); err != nil {
				r.cfg.Logf("relay sessions: sweep: %v", err)
			}
		}
	}
}

type ctxKey struct{}

// NewContext returns a copy of ctx carrying s; the relay router uses it to hand the
// authenticated session to the broker that serves the request.
func NewContext(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// FromContext returns the session NewContext stored in ctx, or nil.
func FromContext(ctx context.Context) *Session {
	s, _ := ctx.Value(ctxKey{}).(*Session)
	return s
}
