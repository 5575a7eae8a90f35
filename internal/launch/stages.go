package launch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/shim"
)

// Names of the standard stages (api.Stage.Name).
const (
	StageLayout  = "layout"
	StageRequest = "request"
	StageShim    = "shim"
	StageReady   = "ready"
	StageWatch   = "watch"
)

// DirError is the layout stage's failure to create the launch directory itself (not a
// directory in it): for a fresh 128-bit id that means something else holds the name.
type DirError struct {
	Dir string
	Err error
}

func (e *DirError) Error() string { return fmt.Sprintf("launch directory %s: %v", e.Dir, e.Err) }
func (e *DirError) Unwrap() error { return e.Err }

// Launch is the launch directory a launch's standard stages work on, and what they made.
type Launch struct {
	// Dir is the launch directory L (internal/launchdir names its files).
	Dir string
	// Log receives what an undo cannot return; nil discards it.
	Log *slog.Logger
	// KeepDir, when set, is asked by the layout stage's undo whether to keep the launch
	// directory (the readiness probe keeps the directory of a box it could not prove gone, for
	// the next probe to reclaim); nil removes it.
	KeepDir func() bool

	// ShimPid is the shim's pid, and ShimStartTime its start time (proc.StartTime, read before
	// the shim could end), once the shim stage completed.
	ShimPid       int
	ShimStartTime uint64
	// handed is the spare's answer still to read (HandShim, Ready).
	handed *shim.Handed
	// Watcher is the watch of the shim, once the watch stage completed.
	Watcher *shim.Watcher
}

// RunDir returns L/run, bound read-only at /run/agentbox in the box.
func (l *Launch) RunDir() string { return filepath.Join(l.Dir, launchdir.RunDir) }

// Socket returns L/shim.sock, the shim's socket.
func (l *Launch) Socket() string { return filepath.Join(l.Dir, launchdir.SocketFile) }

func (l *Launch) log() *slog.Logger {
	if l.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l.Log
}

// Layout is the stage that creates the launch directory (exclusively: an existing one fails
// with a *DirError) and its run directory, both 0700. Undo removes them, the run directory
// (where pairings live) first, unless KeepDir says to keep them.
func (l *Launch) Layout() Stage {
	return Stage{
		Name: StageLayout,
		Do: func(context.Context) error {
			if err := os.Mkdir(l.Dir, 0o700); err != nil {
				return &DirError{Dir: l.Dir, Err: err}
			}
			if err := os.Mkdir(l.RunDir(), 0o700); err != nil {
				if rerr := os.Remove(l.Dir); rerr != nil {
					l.log().Warn("remove launch dir after failed launch", "dir", l.Dir, "err", rerr)
				}
				return fmt.Errorf("launch run dir: %w", err)
			}
			return nil
		},
		Undo: func(error) {
			if l.KeepDir != nil && l.KeepDir() {
				return
			}
			if err := RemoveDir(l.Dir); err != nil {
				l.log().Warn("remove launch dir after failed launch", "dir", l.Dir, "err", err)
			}
		},
	}
}

// RemoveDir removes a launch directory, the run directory (where pairings live) first.
func RemoveDir(dir string) error {
	if err := os.RemoveAll(filepath.Join(dir, launchdir.RunDir)); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// RequestError is the request stage's failure to render the engine's request (as opposed to
// writing it).
type RequestError struct {
	Engine string
	Err    error
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("render %s request: %v", e.Engine, e.Err)
}
func (e *RequestError) Unwrap() error { return e.Err }

// Request is the stage that renders p with eng (a failure is a *RequestError) and writes the
// request and the shim's configuration cfg into the launch directory, 0600. What it writes
// goes with the directory: it needs no undo.
func (l *Launch) Request(eng engine.Engine, p *plan.Plan, cfg shim.Config) Stage {
	return Stage{
		Name: StageRequest,
		Do: func(context.Context) error {
			b, err := eng.Request(p)
			if err != nil {
				return &RequestError{Engine: eng.Name(), Err: err}
			}
			if err := os.WriteFile(filepath.Join(l.Dir, launchdir.RequestFile), b, 0o600); err != nil {
				return err
			}
			return shim.WriteConfig(l.Dir, cfg)
		},
	}
}

// Shim is the stage that starts the launch's shim and sets ShimPid: it hands the launch to
// the spare shim sp; when sp is nil, or, with fallback, when sp cannot take it (it died, or
// refused before listening, so nothing of the box started), it starts a fresh shim
// (shim.Start). Without fallback a spare's failure fails the stage. Undo stops the shim, and
// its box with it (StopShim).
func (l *Launch) Shim(sp *shim.Spare, fallback bool) Stage {
	return Stage{
		Name: StageShim,
		Do: func(context.Context) error {
			p, err := l.startShim(sp, fallback)
			if err != nil {
				return err
			}
			l.setShim(p)
			return nil
		},
		Undo: func(error) {
			if err := StopShim(l.Dir, l.ShimPid); err != nil {
				l.log().Error("stop the box of a failed launch", "dir", l.Dir, "err", err)
			}
		},
	}
}

func (l *Launch) startShim(sp *shim.Spare, fallback bool) (shim.Proc, error) {
	if sp == nil {
		return shim.Start(l.Dir)
	}
	p, err := sp.Launch(l.Dir)
	if err == nil || !fallback {
		return p, err
	}
	l.log().Warn("spare shim failed; starting a new one", "err", err)
	return shim.Start(l.Dir)
}

// HandShim is the shim stage of a launch whose program waits for its client (an attached
// launch): the spare sp is handed the launch with its socket, which listens already
// (shim.Spare.Hand), and ShimPid is set at once; the spare's answer is left to the Ready stage,
// so that the daemon's answer, and the client's connection, need not wait for it. A spare
// that cannot be handed the launch (it died) is replaced, with fallback, by a fresh shim,
// waited for here as Shim does. Undo stops the shim as Shim's does.
func (l *Launch) HandShim(sp *shim.Spare, fallback bool) Stage {
	if sp == nil {
		return l.Shim(nil, fallback)
	}
	return Stage{
		Name: StageShim,
		Do: func(context.Context) error {
			h, err := sp.Hand(l.Dir)
			if err != nil {
				if !fallback {
					return err
				}
				l.log().Warn("spare shim failed; starting a new one", "err", err)
				p, err := shim.Start(l.Dir)
				if err != nil {
					return err
				}
				l.setShim(p)
				return nil
			}
			l.handed = h
			l.setShim(sp.Proc())
			return nil
		},
		Undo: func(error) {
			if l.handed != nil {
				l.handed.Close()
				l.handed = nil
			}
			if err := StopShim(l.Dir, l.ShimPid); err != nil {
				l.log().Error("stop the box of a failed launch", "dir", l.Dir, "err", err)
			}
		},
	}
}

// setShim records the launch's shim.
func (l *Launch) setShim(p shim.Proc) { l.ShimPid, l.ShimStartTime = p.Pid, p.StartTime }

// Handed reports whether HandShim left the spare's answer for the Ready stage to read.
func (l *Launch) Handed() bool { return l.handed != nil }

// Ready is the stage that reads the answer of a spare HandShim handed the launch to: nil once
// it has taken the launch, else the error it reported (it then refuses the launch's client
// with that reason, and ends). After any other shim stage it has nothing to do.
func (l *Launch) Ready() Stage {
	return Stage{
		Name: StageReady,
		Do: func(context.Context) error {
			h := l.handed
			if h == nil {
				return nil
			}
			l.handed = nil
			_, err := h.Wait()
			return err
		},
	}
}

// Watch is the stage that connects a watch to the launch's shim and sets Watcher. Undo
// closes it.
func (l *Launch) Watch() Stage {
	return Stage{
		Name: StageWatch,
		Do: func(context.Context) error {
			w, err := shim.Watch(l.Dir)
			if err != nil {
				return err
			}
			l.Watcher = w
			return nil
		},
		Undo: func(error) { l.Watcher.Close() },
	}
}

// StopShim stops a shim that nobody will supervise: through a watch of its socket (the shim
// stops its box and ends), or, when it does not answer, by SIGKILL of pid; its box dies with
// it (the box's top process has the shim as parent-death signal source).
func StopShim(dir string, pid int) error {
	if w, err := shim.Watch(dir); err == nil {
		defer w.Close()
		if err := w.Stop(); err == nil {
			for range w.Events {
			}
			return nil
		}
	}
	if pid <= 0 {
		return fmt.Errorf("stop shim of %s: no pid", dir)
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// MapErr returns s with the errors of its Do passed through f (for the caller's error
// classes).
func (s Stage) MapErr(f func(error) error) Stage {
	do := s.Do
	s.Do = func(ctx context.Context) error {
		if err := do(ctx); err != nil {
			return f(err)
		}
		return nil
	}
	return s
}
