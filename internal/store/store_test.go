package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

var ctx = context.Background()

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// at is a fixed, clock-independent instant.
var at = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

func newLaunch(id string) *Launch {
	return &Launch{Launch: api.Launch{
		ID:        id,
		Program:   "/usr/bin/claude",
		Args:      []string{"-p", "fix the test"},
		Profile:   "claude",
		Workspace: "/home/u/src/p",
		Engine:    "native",
		Started:   at,
	}, LaunchDir: "/run/user/1000/agentbox/launches/" + id}
}

func TestCreateGet(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	l := newLaunch("a1")
	if err := s.CreateLaunch(ctx, l); err != nil {
		t.Fatal(err)
	}
	if l.State != api.StateStarting {
		t.Errorf("default state %q, want starting", l.State)
	}
	got, err := s.GetLaunch(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Started.Equal(at) {
		t.Errorf("started %v, want %v", got.Started, at)
	}
	got.Started = l.Started
	if !reflect.DeepEqual(got, l) {
		t.Errorf("got %+v\nwant %+v", got, l)
	}
	if _, err := s.GetLaunch(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetLaunch(missing) = %v, want ErrNotFound", err)
	}
	if err := s.CreateLaunch(ctx, newLaunch("a1")); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate CreateLaunch = %v, want ErrExists", err)
	}
	if err := s.CreateLaunch(ctx, &Launch{Launch: api.Launch{ID: "x"}}); err == nil {
		t.Error("CreateLaunch without program and workspace succeeded")
	}
	bad := newLaunch("bad")
	bad.State = "sleeping"
	if err := s.CreateLaunch(ctx, bad); err == nil {
		t.Error("CreateLaunch with an unknown state succeeded")
	}
}

func TestFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentbox.db")
	s := open(t, path)
	if err := s.CreateLaunch(ctx, newLaunch("a")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	var mode string
	if err := s.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q %v, want wal", mode, err)
	}
	var sync int
	if err := s.db.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil || sync != 2 {
		t.Errorf("synchronous %d %v, want 2 (FULL)", sync, err)
	}
}

func TestTransitions(t *testing.T) {
	code := func(c int) *int { return &c }
	type step struct {
		tr   Transition
		want error // nil, ErrTransition
	}
	tests := []struct {
		name  string
		steps []step
		final string
	}{
		{"run and exit", []step{
			{Transition{To: api.StateRunning, BoxPid: 4242, BoxPidNS: 4026532999}, nil},
			{Transition{To: api.StateExited, ExitCode: code(3), Ended: at.Add(time.Minute)}, nil},
		}, api.StateExited},
		{"exit before running was recorded", []step{
			{Transition{To: api.StateExited, ExitCode: code(0)}, nil},
		}, api.StateExited},
		{"failed at start", []step{
			{Transition{To: api.StateFailed, Error: &api.Error{Code: api.CodeBoxSetupFailed, Message: "mount: EPERM", Hint: "see readiness"}}, nil},
			{Transition{To: api.StateRunning}, ErrTransition},
		}, api.StateFailed},
		{"lost while running", []step{
			{Transition{To: api.StateRunning}, nil},
			{Transition{To: api.StateLost}, nil},
			{Transition{To: api.StateExited, ExitCode: code(0)}, ErrTransition},
		}, api.StateLost},
		{"exited is final", []step{
			{Transition{To: api.StateRunning}, nil},
			{Transition{To: api.StateExited, ExitCode: code(1)}, nil},
			{Transition{To: api.StateRunning}, ErrTransition},
			{Transition{To: api.StateLost}, ErrTransition},
		}, api.StateExited},
		{"running twice", []step{
			{Transition{To: api.StateRunning}, nil},
			{Transition{To: api.StateRunning}, ErrTransition},
		}, api.StateRunning},
		{"running cannot fail", []step{
			{Transition{To: api.StateRunning}, nil},
			{Transition{To: api.StateFailed, Error: &api.Error{Message: "x"}}, ErrTransition},
		}, api.StateRunning},
		{"exit needs a code", []step{
			{Transition{To: api.StateExited}, ErrTransition},
		}, api.StateStarting},
		{"code only on exit", []step{
			{Transition{To: api.StateRunning, ExitCode: code(0)}, ErrTransition},
		}, api.StateStarting},
		{"failed needs an error", []step{
			{Transition{To: api.StateFailed}, ErrTransition},
		}, api.StateStarting},
		{"unknown state", []step{
			{Transition{To: "paused"}, ErrTransition},
		}, api.StateStarting},
	}
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("t%d", i)
			if err := s.CreateLaunch(ctx, newLaunch(id)); err != nil {
				t.Fatal(err)
			}
			for j, st := range tt.steps {
				err := s.Transition(ctx, id, st.tr)
				if (st.want == nil) != (err == nil) || (st.want != nil && !errors.Is(err, st.want)) {
					t.Fatalf("step %d (to %s): got %v, want %v", j, st.tr.To, err, st.want)
				}
			}
			l, err := s.GetLaunch(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if l.State != tt.final {
				t.Errorf("final state %s, want %s", l.State, tt.final)
			}
			if terminal(l.State) == l.Ended.IsZero() {
				t.Errorf("state %s with ended %v", l.State, l.Ended)
			}
		})
	}
	if err := s.Transition(ctx, "missing", Transition{To: api.StateRunning}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Transition(missing) = %v, want ErrNotFound", err)
	}

	// The recorded details of the first case.
	l, err := s.GetLaunch(ctx, "t0")
	if err != nil {
		t.Fatal(err)
	}
	if l.BoxPid != 4242 || l.BoxPidNS != 4026532999 || l.ExitCode == nil || *l.ExitCode != 3 || !l.Ended.Equal(at.Add(time.Minute)) {
		t.Errorf("run and exit recorded %+v", l)
	}
	f, err := s.GetLaunch(ctx, "t2")
	if err != nil {
		t.Fatal(err)
	}
	if f.Error == nil || f.Error.Code != api.CodeBoxSetupFailed || f.Error.Message != "mount: EPERM" || f.Error.Hint != "see readiness" || f.ExitCode != nil {
		t.Errorf("failed launch recorded %+v (error %+v)", f, f.Error)
	}
}

func TestShimAndSettled(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	if err := s.CreateLaunch(ctx, newLaunch("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetShim(ctx, "a", 777, 1<<40+5); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLaunchDir(ctx, "a", "/r/launches/a"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSettled(ctx, "a"); !errors.Is(err, ErrTransition) {
		t.Fatalf("settling a starting launch = %v, want ErrTransition", err)
	}
	if err := s.Transition(ctx, "a", Transition{To: api.StateLost}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSettled(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	l, err := s.GetLaunch(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if l.ShimPid != 777 || l.ShimStartTime != 1<<40+5 || l.LaunchDir != "/r/launches/a" || !l.Settled {
		t.Errorf("got %+v", l)
	}
	for name, err := range map[string]error{
		"SetShim":      s.SetShim(ctx, "missing", 1, 1),
		"SetLaunchDir": s.SetLaunchDir(ctx, "missing", "/x"),
		"SetSettled":   s.SetSettled(ctx, "missing"),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s(missing) = %v, want ErrNotFound", name, err)
		}
	}
}

func TestListAndRunning(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	mk := func(id string, minute int, ws string) {
		l := newLaunch(id)
		l.Started = at.Add(time.Duration(minute) * time.Minute)
		l.Workspace = ws
		if err := s.CreateLaunch(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	mk("starting", 1, "/w1")
	mk("running", 2, "/w1")
	mk("exited-unsettled", 3, "/w2")
	mk("exited-settled", 4, "/w2")
	mk("failed-settled", 5, "/w1")
	zero := 0
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Transition(ctx, "running", Transition{To: api.StateRunning}))
	must(s.Transition(ctx, "exited-unsettled", Transition{To: api.StateExited, ExitCode: &zero}))
	must(s.Transition(ctx, "exited-settled", Transition{To: api.StateExited, ExitCode: &zero}))
	must(s.SetSettled(ctx, "exited-settled"))
	must(s.Transition(ctx, "failed-settled", Transition{To: api.StateFailed, Error: &api.Error{Code: "x", Message: "y"}}))
	must(s.SetSettled(ctx, "failed-settled"))

	ids := func(ls []*Launch) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.ID)
		}
		return out
	}
	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"all newest first", Filter{}, []string{"failed-settled", "exited-settled", "exited-unsettled", "running", "starting"}},
		{"by state", Filter{States: []string{api.StateExited, api.StateStarting}}, []string{"exited-settled", "exited-unsettled", "starting"}},
		{"by workspace", Filter{Workspace: "/w1"}, []string{"failed-settled", "running", "starting"}},
		{"limit", Filter{Limit: 2}, []string{"failed-settled", "exited-settled"}},
		{"nothing", Filter{States: []string{api.StateLost}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, err := s.ListLaunches(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(ls); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	r, err := s.Running(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(r), []string{"starting", "running", "exited-unsettled"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Running = %v, want %v", got, want)
	}
}

func TestAudit(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	a1 := &Audit{Time: at, LaunchID: "a", Kind: "launch.start", Detail: json.RawMessage(`{"egress":"deny"}`)}
	a2 := &Audit{Time: at, Kind: "daemon.start"}
	a3 := &Audit{Time: at, LaunchID: "a", Kind: "session.revoke"}
	for _, a := range []*Audit{a1, a2, a3} {
		if err := s.AddAudit(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if !(a1.Seq < a2.Seq && a2.Seq < a3.Seq) {
		t.Errorf("seq not increasing: %d %d %d", a1.Seq, a2.Seq, a3.Seq)
	}
	got, err := s.ListAudit(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != "launch.start" || string(got[0].Detail) != `{"egress":"deny"}` || got[1].Kind != "session.revoke" || string(got[1].Detail) != "{}" || !got[0].Time.Equal(at) {
		t.Errorf("ListAudit(a) = %+v", got)
	}
	all, err := s.ListAudit(ctx, "")
	if err != nil || len(all) != 3 {
		t.Errorf("ListAudit() = %d entries, %v", len(all), err)
	}
	if err := s.AddAudit(ctx, &Audit{Kind: "x", Detail: json.RawMessage(`{bad`)}); err == nil {
		t.Error("AddAudit with invalid JSON succeeded")
	}
	if err := s.AddAudit(ctx, &Audit{}); err == nil {
		t.Error("AddAudit without kind succeeded")
	}
}

func TestReopenPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentbox.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateLaunch(ctx, newLaunch("kept")); err != nil {
		t.Fatal(err)
	}
	if err := s.Transition(ctx, "kept", Transition{To: api.StateRunning, BoxPid: 9}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAudit(ctx, &Audit{Time: at, LaunchID: "kept", Kind: "launch.start"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := open(t, path)
	l, err := s2.GetLaunch(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if l.State != api.StateRunning || l.BoxPid != 9 || !reflect.DeepEqual(l.Args, []string{"-p", "fix the test"}) {
		t.Errorf("after reopen: %+v", l)
	}
	r, err := s2.Running(ctx)
	if err != nil || len(r) != 1 || r[0].ID != "kept" {
		t.Errorf("Running after reopen = %v, %v", r, err)
	}
	if a, err := s2.ListAudit(ctx, "kept"); err != nil || len(a) != 1 {
		t.Errorf("audit after reopen = %v, %v", a, err)
	}
	var v int
	if err := s2.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != SchemaVersion() {
		t.Errorf("user_version %d %v, want %d", v, err, SchemaVersion())
	}
}

func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentbox.db")
	// Two Stores on one file behave like two processes: separate connection pools and locks.
	stores := []*Store{open(t, path), open(t, path)}
	const per = 50
	var wg sync.WaitGroup
	errs := make(chan error, 2*per*3)
	for w, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				id := fmt.Sprintf("w%d-%d", w, i)
				if err := s.CreateLaunch(ctx, newLaunch(id)); err != nil {
					errs <- err
					continue
				}
				if err := s.Transition(ctx, id, Transition{To: api.StateRunning}); err != nil {
					errs <- err
				}
				if err := s.AddAudit(ctx, &Audit{Time: at, LaunchID: id, Kind: "launch.start"}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ls, err := stores[0].ListLaunches(ctx, Filter{States: []string{api.StateRunning}})
	if err != nil || len(ls) != 2*per {
		t.Fatalf("%d running launches, %v; want %d", len(ls), err, 2*per)
	}
	a, err := stores[1].ListAudit(ctx, "")
	if err != nil || len(a) != 2*per {
		t.Fatalf("%d audit entries, %v; want %d", len(a), err, 2*per)
	}
}

func TestCorruptRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
	}{
		{"not a database", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(strings.Repeat("this is not sqlite\n", 400)), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"damaged pages", func(t *testing.T, path string) {
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 200 {
				l := newLaunch(fmt.Sprintf("l%03d", i))
				l.Workspace = strings.Repeat("w", 200)
				if err := s.CreateLaunch(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			// Fold the WAL into the file so the damage below hits the real pages.
			if _, err := s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
				t.Fatal(err)
			}
			s.Close()
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fi, _ := f.Stat()
			junk := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024))
			for off := int64(4096); off+int64(len(junk)) < fi.Size(); off += 3 * 4096 {
				if _, err := f.WriteAt(junk, off); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agentbox.db")
			tt.setup(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(path)
			if err == nil {
				s.Close()
				t.Fatal("Open of a corrupt file succeeded")
			}
			t.Logf("Open: %v", err)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open = %v, want ErrCorrupt naming %s", err, path)
			}
			after, err := os.ReadFile(path)
			if err != nil || string(after) != string(before) {
				t.Fatalf("Open changed the corrupt file (never reset it)")
			}
		})
	}
}

func TestTooNewRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentbox.db")
	s := open(t, path)
	if _, err := s.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion()+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(path); !errors.Is(err, ErrTooNew) {
		t.Fatalf("Open of a newer schema = %v, want ErrTooNew", err)
	}
}

func TestOpenRefusesNonFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir); err == nil {
		t.Fatal("Open of a directory succeeded")
	}
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(filepath.Join(dir, "target.db"), link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link); err == nil {
		t.Fatal("Open through a symlink succeeded")
	}
}

func TestSetRunningAndFinish(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	l := newLaunch("f")
	if err := s.CreateLaunch(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunning(ctx, "f", 31337, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, l); !errors.Is(err, ErrTransition) {
		t.Fatalf("Finish with state starting = %v, want ErrTransition", err)
	}
	code := 130
	l.State, l.ExitCode, l.Ended, l.Settled = api.StateExited, &code, at.Add(time.Hour), true
	if err := s.Finish(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, l); err != nil {
		t.Fatalf("second Finish of the same outcome: %v", err)
	}
	got, err := s.GetLaunch(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != api.StateExited || got.BoxPid != 31337 || got.ExitCode == nil || *got.ExitCode != 130 || !got.Settled || !got.Ended.Equal(at.Add(time.Hour)) {
		t.Errorf("after Finish: %+v", got)
	}
	l.State, l.ExitCode, l.Error = api.StateLost, nil, nil
	if err := s.Finish(ctx, l); !errors.Is(err, ErrTransition) {
		t.Errorf("Finish exited → lost = %v, want ErrTransition", err)
	}
	if err := s.SetRunning(ctx, "missing", 1, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetRunning(missing) = %v, want ErrNotFound", err)
	}
}

// TestPruneAndProbes: PruneLaunches deletes ended, settled launches that ended before the
// cut-off (never a running or unsettled one), with their drift; HideProbes drops the escape
// probe's launches from a list.
func TestPruneAndProbes(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	zero := 0
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range []string{"running", "exited-unsettled", "exited-old", "failed-old", "exited-new", "probe"} {
		l := newLaunch(id)
		l.Started = at.Add(time.Duration(i) * time.Minute)
		if id == "probe" {
			l.Program, l.Args = "/usr/libexec/agentbox/agentbox-daemon", []string{ProbeCommand, "-targets", "x"}
		}
		must(s.CreateLaunch(ctx, l))
	}
	must(s.Transition(ctx, "running", Transition{To: api.StateRunning}))
	must(s.Transition(ctx, "exited-unsettled", Transition{To: api.StateExited, ExitCode: &zero, Ended: at.Add(time.Hour)}))
	must(s.Transition(ctx, "exited-old", Transition{To: api.StateExited, ExitCode: &zero, Ended: at.Add(time.Hour)}))
	must(s.Transition(ctx, "failed-old", Transition{To: api.StateFailed, Error: &api.Error{Code: "x", Message: "y"}, Ended: at.Add(time.Hour)}))
	must(s.Transition(ctx, "exited-new", Transition{To: api.StateExited, ExitCode: &zero, Ended: at.Add(3 * time.Hour)}))
	must(s.Transition(ctx, "probe", Transition{To: api.StateExited, ExitCode: &zero, Ended: at.Add(time.Hour)}))
	for _, id := range []string{"exited-old", "failed-old", "exited-new", "probe"} {
		must(s.SetSettled(ctx, id))
	}
	must(s.AddDrift(ctx, "exited-old", api.DriftEvent{Time: at, Kind: "modified", Path: "/w/.git/config", Source: "exit", Alert: true}))

	ls, err := s.ListLaunches(ctx, Filter{HideProbes: true})
	must(err)
	for _, l := range ls {
		if l.ID == "probe" {
			t.Errorf("HideProbes listed the probe's launch")
		}
	}
	if len(ls) != 5 {
		t.Errorf("HideProbes listed %d launches, want 5", len(ls))
	}

	n, err := s.PruneLaunches(ctx, at.Add(2*time.Hour))
	must(err)
	if n != 3 {
		t.Errorf("pruned %d, want 3 (exited-old, failed-old, probe)", n)
	}
	ls, err = s.ListLaunches(ctx, Filter{})
	must(err)
	var ids []string
	for _, l := range ls {
		ids = append(ids, l.ID)
	}
	if want := []string{"exited-new", "exited-unsettled", "running"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("after prune: %v, want %v", ids, want)
	}
	var drift int
	must(s.db.QueryRowContext(ctx, `SELECT count(*) FROM drift WHERE launch_id = 'exited-old'`).Scan(&drift))
	if drift != 0 {
		t.Errorf("the pruned launch's drift events remain (%d)", drift)
	}
}

// TestFinishSettlesWithItsState: Finish records the final state and the settlement together
// (one transaction); a Finish whose state change is refused settles nothing, and a Finish of
// the state the launch is in records only its settlement.
func TestFinishSettlesWithItsState(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	l := newLaunch("g")
	if err := s.CreateLaunch(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunning(ctx, "g", 4242, nil); err != nil {
		t.Fatal(err)
	}
	l.State, l.Error, l.Settled = api.StateFailed, &api.Error{Code: "x", Message: "x"}, true
	if err := s.Finish(ctx, l); !errors.Is(err, ErrTransition) {
		t.Fatalf("Finish running → failed = %v, want ErrTransition", err)
	}
	if got, err := s.GetLaunch(ctx, "g"); err != nil || got.State != api.StateRunning || got.Settled {
		t.Fatalf("after a refused Finish: %+v, %v; want running and unsettled", got, err)
	}
	code := 0
	l.State, l.Error, l.ExitCode, l.Settled = api.StateExited, nil, &code, false
	if err := s.Finish(ctx, l); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetLaunch(ctx, "g"); err != nil || got.State != api.StateExited || got.Settled {
		t.Fatalf("after an unsettled Finish: %+v, %v; want exited and unsettled", got, err)
	}
	l.Settled = true
	if err := s.Finish(ctx, l); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetLaunch(ctx, "g"); err != nil || got.State != api.StateExited || !got.Settled {
		t.Fatalf("after a settled Finish: %+v, %v; want exited and settled", got, err)
	}
}
