// Package launch is the launch pipeline the daemon and the readiness probe share: a launch goes
// through explicit stages (resolve, directory layout, brokers and plan, request and shim
// config, record, spare or fresh shim, watch), each timed and each with its undo. A stage that
// fails, or a caller that gives up, rolls the launch back: the undos of the stages that
// completed run in reverse order, so that nothing of a failed launch stays behind. The
// standard stages (Layout, Request, Shim, Watch) work on a launch directory (internal/launchdir);
// the daemon and the probe add their own stages (brokers, record, the probe's challenge)
// between them.
package launch

import (
	"context"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// Stage is one step of a launch.
type Stage struct {
	// Name names the stage in the launch's record (api.Stage.Name).
	Name string
	// Do runs the stage. A Do that fails must leave nothing of its own behind: its Undo runs
	// only once it has completed.
	Do func(ctx context.Context) error
	// Undo takes back what Do did, when a later stage fails or the launch is rolled back;
	// cause is the error that ended the launch (nil for a rollback without one). Nil means the
	// stage needs no undo (what it made goes with an earlier stage's, such as files in the
	// launch directory).
	Undo func(cause error)
}

// Run is one launch's pass through its stages. Its zero value is ready to use; it is safe for
// use by the goroutine that runs the launch and by the stages Go started.
type Run struct {
	mu     sync.Mutex
	stages []*entry // in the order they started
	// committed: the launch is handed over (to supervision); Rollback does nothing.
	committed bool
	rolled    bool
	pending   sync.WaitGroup
}

type entry struct {
	s        Stage
	duration time.Duration
	done     bool // completed without error
	undone   bool
}

// Do runs s now. When s fails, Do rolls the launch back (see Rollback) with s's error, unless
// the launch was committed, and returns that error.
func (r *Run) Do(ctx context.Context, s Stage) error {
	e := r.begin(s)
	return r.finish(e, r.timed(ctx, e))
}

// Pending is a stage started by Go.
type Pending struct {
	r    *Run
	e    *entry
	done chan struct{}
	err  error
}

// Go starts s on its own goroutine, so that it overlaps the stages run after it; Wait joins
// it. Its place in the launch's stages is where it started.
func (r *Run) Go(ctx context.Context, s Stage) *Pending {
	p := &Pending{r: r, e: r.begin(s), done: make(chan struct{})}
	r.pending.Add(1)
	go func() {
		defer r.pending.Done()
		defer close(p.done)
		p.err = r.timed(ctx, p.e)
		if p.err == nil {
			r.mu.Lock()
			p.e.done = true
			r.mu.Unlock()
		}
	}()
	return p
}

// Wait waits for the stage Go started and returns its error; a failure rolls the launch back
// as Do does (once, however often Wait is called).
func (p *Pending) Wait() error {
	<-p.done
	if p.err != nil {
		p.r.Rollback(p.err)
	}
	return p.err
}

// Rollback waits for the stages Go started, then runs the Undo of every completed stage, the
// last started first, each once. cause is the error that ended the launch (nil: none). After
// Commit it does nothing: the launch belongs to whoever it was handed to.
func (r *Run) Rollback(cause error) {
	r.pending.Wait()
	r.mu.Lock()
	if r.committed || r.rolled {
		r.mu.Unlock()
		return
	}
	r.rolled = true
	var undo []*entry
	for i := len(r.stages) - 1; i >= 0; i-- {
		if e := r.stages[i]; e.done && !e.undone && e.s.Undo != nil {
			e.undone = true
			undo = append(undo, e)
		}
	}
	r.mu.Unlock()
	for _, e := range undo {
		e.s.Undo(cause)
	}
}

// Commit hands the launch over: from now on no undo runs, and a stage that fails only
// returns its error. Stages run after Commit are still timed.
func (r *Run) Commit() {
	r.mu.Lock()
	r.committed = true
	r.mu.Unlock()
}

// Stages returns the stages that completed so far, in the order they started, with their
// durations.
func (r *Run) Stages() []api.Stage {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []api.Stage
	for _, e := range r.stages {
		if e.done {
			out = append(out, api.Stage{Name: e.s.Name, Duration: e.duration})
		}
	}
	return out
}

func (r *Run) begin(s Stage) *entry {
	e := &entry{s: s}
	r.mu.Lock()
	r.stages = append(r.stages, e)
	r.mu.Unlock()
	return e
}

// timed runs e's Do and records its duration (monotonic clock: never negative).
func (r *Run) timed(ctx context.Context, e *entry) error {
	t0 := time.Now()
	err := e.s.Do(ctx)
	d := time.Since(t0)
	r.mu.Lock()
	e.duration = d
	r.mu.Unlock()
	return err
}

func (r *Run) finish(e *entry, err error) error {
	if err != nil {
		r.Rollback(err)
		return err
	}
	r.mu.Lock()
	e.done = true
	r.mu.Unlock()
	return nil
}
