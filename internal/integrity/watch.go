package integrity

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Check is the outcome of one verification.
type Check struct {
	Source      Source
	Roots       int
	Transitions []Transition
	// Took is the wall time the verification took (for the log line only).
	Took time.Duration
}

// Watcher verifies one launch's State periodically, on inotify events and on demand. Its
// zero value is not usable: set State.
type Watcher struct {
	// State is verified and moved on by every transition.
	State *State
	// Interval between periodic checks; zero means DefaultInterval.
	Interval time.Duration
	// OnTransition, if set, is called for every transition as it is found (under the
	// watcher's lock: keep it short).
	OnTransition func(Source, Transition)
	// OnCheck, if set, is called after every check with its outcome (under the lock).
	OnCheck func(Check)
	// Debounce is how long events are gathered before a check; zero means 50ms.
	Debounce time.Duration
	// MaxWatches bounds the directories watched with inotify; zero means 4096. Once a folder
	// goes unwatched (the bound, or the user's inotify watches used up), file events no longer
	// cover the workspace: from then on each check, periodic or on an event, rescans the whole
	// workspace for executable configuration (on events at most once per ten times the last
	// full scan's duration; a folder beyond the cover raises no event of its own).
	MaxWatches int
	// OnCoverLost, if set, is called once, when the first folder goes unwatched, with the number
	// of folders watched.
	OnCoverLost func(watched int)

	mu        sync.Mutex
	coverLost atomic.Bool
	opened    *inotifier // made by Open, taken by Run
}

// lostCover records that a folder of the workspace goes unwatched.
func (w *Watcher) lostCover(watched int) {
	if w.coverLost.CompareAndSwap(false, true) && w.OnCoverLost != nil {
		w.OnCoverLost(watched)
	}
}

// OwnDeps records that the dependency folders paths are the box's own (State.Own), and
// returns what save, when not nil, returns for the state so changed (called under the
// watcher's lock: the state saved is one no check is changing).
func (w *Watcher) OwnDeps(paths []string, save func(*State) error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.State.Own = slices.Clone(paths)
	if save == nil {
		return nil
	}
	return save(w.State)
}

// Verify checks the roots (and, when full, rescans the whole workspace for executable
// configuration), reports every transition and returns them.
func (w *Watcher) Verify(src Source, full bool) []Transition {
	return w.verify(src, full, nil)
}

func (w *Watcher) verify(src Source, full bool, dirs []string) []Transition {
	return w.verifyTimed(src, full, dirs, nil)
}

// verifyTimed is verify, calling took (when not nil) with each of dirs' scan time.
func (w *Watcher) verifyTimed(src Source, full bool, dirs []string, took func(dir string, d time.Duration)) []Transition {
	w.mu.Lock()
	defer w.mu.Unlock()
	start := time.Now()
	ts := w.State.VerifyRoots()
	switch {
	case full && src == SourceExit:
		ts = append(ts, w.State.VerifyExit()...)
	case full:
		ts = append(ts, w.State.VerifyExec()...)
	case len(dirs) > 0:
		ts = append(ts, w.State.verifyExecIn(dirs, took)...)
	}
	if w.OnTransition != nil {
		for _, t := range ts {
			w.OnTransition(src, t)
		}
	}
	if w.OnCheck != nil {
		w.OnCheck(Check{Source: src, Roots: len(w.State.Roots), Transitions: ts, Took: time.Since(start)})
	}
	return ts
}

// IndexRecheckWait bounds how long SettleIndexes waits for git's index locks to go.
var IndexRecheckWait = 30 * time.Minute

// SettleIndexes, after the check at exit, checks again each index that check wrote beside
// git's lock (State.RecheckIndexes) once the locks have gone, reporting the transitions as the
// check at exit's; it returns when none is left, after IndexRecheckWait, or when ctx ends.
func (w *Watcher) SettleIndexes(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	deadline := time.After(IndexRecheckWait)
	for {
		w.mu.Lock()
		pending := w.State.IndexesLocked()
		w.mu.Unlock()
		if !pending {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-t.C:
		}
		w.mu.Lock()
		ts := w.State.RecheckIndexes()
		if w.OnTransition != nil {
			for _, tr := range ts {
				w.OnTransition(SourceExit, tr)
			}
		}
		if w.OnCheck != nil && len(ts) > 0 {
			w.OnCheck(Check{Source: SourceExit, Roots: len(w.State.Roots), Transitions: ts})
		}
		w.mu.Unlock()
	}
}

func (w *Watcher) interval() time.Duration {
	if w.Interval > 0 {
		return w.Interval
	}
	return DefaultInterval
}

func (w *Watcher) debounce() time.Duration {
	if w.Debounce > 0 {
		return w.Debounce
	}
	return 50 * time.Millisecond
}

func (w *Watcher) maxWatches() int {
	if w.MaxWatches > 0 {
		return w.MaxWatches
	}
	return 4096
}

// periodic runs the periodic checks until ctx ends.
func (w *Watcher) periodic(ctx context.Context) {
	t := time.NewTicker(w.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Verify(SourcePeriodic, w.coverLost.Load())
		}
	}
}
