package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// TestStagesRecorded guards that the stages of a launch's start are kept with it, in order,
// by SetRunning and by Finish, and that a launch without any reads back nil.
func TestStagesRecorded(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	ctx := context.Background()
	st := []api.Stage{{Name: "layout", Duration: 3 * time.Microsecond}, {Name: "shim", Duration: 2 * time.Millisecond}}
	for _, id := range []string{"ran", "failed", "none"} {
		if err := s.CreateLaunch(ctx, newLaunch(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetRunning(ctx, "ran", 7, st); err != nil {
		t.Fatal(err)
	}
	l := newLaunch("failed")
	l.State, l.Error, l.Stages = api.StateFailed, &api.Error{Code: "box_setup_failed", Message: "x"}, st[:1]
	if err := s.Finish(ctx, l); err != nil {
		t.Fatal(err)
	}
	want := map[string][]api.Stage{"ran": st, "failed": st[:1], "none": nil}
	ls, err := s.ListLaunches(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if !reflect.DeepEqual(l.Stages, want[l.ID]) {
			t.Errorf("launch %s stages %+v, want %+v", l.ID, l.Stages, want[l.ID])
		}
	}
	// A later transition without stages leaves them.
	ended := newLaunch("ran")
	code := 0
	ended.State, ended.ExitCode = api.StateExited, &code
	ended.Stages = nil
	if err := s.Finish(ctx, ended); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetLaunch(ctx, "ran"); err != nil || !reflect.DeepEqual(got.Stages, st) {
		t.Errorf("after exit: stages %+v, %v; want %+v", got.Stages, err, st)
	}
}

// TestStagesMigration guards that a database of the schema before stages (version 5, with a
// launch in it) opens, migrates, keeps its launch (stages nil) and records stages afterwards.
func TestStagesMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentbox.db")
	if err := prepareFile(path); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for v, m := range migrations[:5] {
		if _, err := db.Exec(m); err != nil {
			t.Fatalf("migration %d: %v", v+1, err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = 5`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO launches (id, program, args, profile, workspace, engine, state, detached, launch_dir,
		shim_pid, shim_start_time, box_pid, box_pidns, started_ns, settled) VALUES ('old', 'sh', '[]', '', '/w', 'native', 'starting', 0, '', 0, 0, 0, 0, 1, 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s := open(t, path)
	l, err := s.GetLaunch(context.Background(), "old")
	if err != nil || l.Stages != nil {
		t.Fatalf("old launch after migration: %+v, %v (want stages nil)", l, err)
	}
	st := []api.Stage{{Name: "watch", Duration: time.Millisecond}}
	if err := s.SetRunning(context.Background(), "old", 3, st); err != nil {
		t.Fatal(err)
	}
	if l, err := s.GetLaunch(context.Background(), "old"); err != nil || !reflect.DeepEqual(l.Stages, st) {
		t.Errorf("stages after migration %+v, %v; want %+v", l.Stages, err, st)
	}
}
