package launch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/launchdir"
)

var errInjected = errors.New("injected stage failure")

// recorder makes stages that log their runs and undos.
type recorder struct {
	mu     sync.Mutex
	log    []string
	causes []error
}

func (r *recorder) add(s string, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
	if cause != nil {
		r.causes = append(r.causes, cause)
	}
}

func (r *recorder) stage(name string, fail bool) Stage {
	return Stage{
		Name: name,
		Do: func(context.Context) error {
			r.add("do "+name, nil)
			if fail {
				return errInjected
			}
			return nil
		},
		Undo: func(cause error) {
			r.add("undo "+name, cause)
		},
	}
}

func names(r *Run) []string {
	var out []string
	for _, s := range r.Stages() {
		out = append(out, s.Name)
	}
	return out
}

// TestStagesInOrder guards that a launch's completed stages are listed in the order they ran,
// each with a non-negative duration, and that a completed launch undoes nothing.
func TestStagesInOrder(t *testing.T) {
	var run Run
	rec := &recorder{}
	for _, n := range []string{"resolve", "layout", "request", "record", "shim"} {
		if err := run.Do(context.Background(), rec.stage(n, false)); err != nil {
			t.Fatal(err)
		}
	}
	run.Commit()
	run.Rollback(errInjected) // after Commit: nothing
	if got, want := names(&run), []string{"resolve", "layout", "request", "record", "shim"}; !reflect.DeepEqual(got, want) {
		t.Errorf("stages %v, want %v", got, want)
	}
	for _, s := range run.Stages() {
		if s.Duration < 0 {
			t.Errorf("stage %s duration %v < 0", s.Name, s.Duration)
		}
	}
	for _, l := range rec.log {
		if l[:4] == "undo" {
			t.Errorf("committed launch ran %q", l)
		}
	}
}

// TestRollbackUndoesCompletedStages guards the pipeline's rollback: when a stage fails, the
// undo of every stage that completed before it runs, the last first, each once and with the
// failure as the cause; the failed stage's own undo does not run, and it is not listed.
func TestRollbackUndoesCompletedStages(t *testing.T) {
	var run Run
	rec := &recorder{}
	ctx := context.Background()
	for _, n := range []string{"layout", "brokers", "request"} {
		if err := run.Do(ctx, rec.stage(n, false)); err != nil {
			t.Fatal(err)
		}
	}
	if err := run.Do(ctx, rec.stage("shim", true)); !errors.Is(err, errInjected) {
		t.Fatalf("failing stage returned %v", err)
	}
	run.Rollback(nil) // a second rollback undoes nothing again
	want := []string{"do layout", "do brokers", "do request", "do shim", "undo request", "undo brokers", "undo layout"}
	if !reflect.DeepEqual(rec.log, want) {
		t.Errorf("ran %v\nwant %v", rec.log, want)
	}
	for _, c := range rec.causes {
		if !errors.Is(c, errInjected) {
			t.Errorf("undo cause %v, want the injected failure", c)
		}
	}
	if got, want := names(&run), []string{"layout", "brokers", "request"}; !reflect.DeepEqual(got, want) {
		t.Errorf("stages %v, want %v", got, want)
	}
}

// TestRollbackWaitsForConcurrentStage guards the overlapped record and shim of an attached
// launch: a stage started with Go keeps its place in the order, a failure of the stage that
// runs meanwhile rolls back only once the concurrent one has ended and undoes it too, and a
// failure of the concurrent stage, seen at Wait, undoes the stages completed meanwhile.
func TestRollbackWaitsForConcurrentStage(t *testing.T) {
	ctx := context.Background()
	t.Run("ForegroundFails", func(t *testing.T) {
		var run Run
		rec := &recorder{}
		release := make(chan struct{})
		if err := run.Do(ctx, rec.stage("layout", false)); err != nil {
			t.Fatal(err)
		}
		slow := rec.stage("record", false)
		do := slow.Do
		slow.Do = func(ctx context.Context) error { <-release; return do(ctx) }
		p := run.Go(ctx, slow)
		shim := rec.stage("shim", true)
		shimDo := shim.Do
		shim.Do = func(ctx context.Context) error { err := shimDo(ctx); close(release); return err }
		if err := run.Do(ctx, shim); err == nil {
			t.Fatal("failing stage succeeded")
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		want := []string{"do layout", "do shim", "do record", "undo record", "undo layout"}
		if !reflect.DeepEqual(rec.log, want) {
			t.Errorf("ran %v\nwant %v", rec.log, want)
		}
	})
	t.Run("ConcurrentFails", func(t *testing.T) {
		var run Run
		rec := &recorder{}
		if err := run.Do(ctx, rec.stage("layout", false)); err != nil {
			t.Fatal(err)
		}
		p := run.Go(ctx, rec.stage("record", true))
		if err := run.Do(ctx, rec.stage("shim", false)); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(); !errors.Is(err, errInjected) {
			t.Fatalf("Wait = %v", err)
		}
		if got, want := rec.log[len(rec.log)-2:], []string{"undo shim", "undo layout"}; !reflect.DeepEqual(got, want) {
			t.Errorf("undos %v, want %v (all: %v)", got, want, rec.log)
		}
		if got, want := names(&run), []string{"layout", "shim"}; !reflect.DeepEqual(got, want) {
			t.Errorf("stages %v, want %v", got, want)
		}
	})
}

// TestLayoutUndoneWhenLaterStageFails runs the real layout stage: the launch directory and its
// run directory exist after it, and a later stage's failure removes them (KeepDir keeps them).
func TestLayoutUndoneWhenLaterStageFails(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(map[bool]string{false: "Removed", true: "Kept"}[keep], func(t *testing.T) {
			parent := t.TempDir()
			l := &Launch{Dir: filepath.Join(parent, "0123"), KeepDir: func() bool { return keep }}
			var run Run
			ctx := context.Background()
			if err := run.Do(ctx, l.Layout()); err != nil {
				t.Fatal(err)
			}
			if st, err := os.Stat(filepath.Join(l.Dir, launchdir.RunDir)); err != nil || st.Mode().Perm() != 0o700 {
				t.Fatalf("run dir: %v, %v", st, err)
			}
			// A pairing-like file in the run directory, as a broker would leave it.
			if err := os.WriteFile(filepath.Join(l.RunDir(), "relay.sock"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := run.Do(ctx, (&recorder{}).stage("request", true)); err == nil {
				t.Fatal("failing stage succeeded")
			}
			_, err := os.Stat(l.Dir)
			if keep != (err == nil) {
				t.Errorf("after rollback (keep %v): stat launch dir: %v", keep, err)
			}
			// A second layout of the same directory fails with a DirError (the daemon's
			// launch_dir_conflict) when it was kept.
			if keep {
				var de *DirError
				if err := (&Run{}).Do(ctx, l.Layout()); !errors.As(err, &de) {
					t.Errorf("layout over an existing directory: %v, want a DirError", err)
				}
			}
		})
	}
}
