package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/store"
)

// TestPruneStaged guards review finding F5's leftovers: the staged copies a collect at exit
// could not collect are left in staged/<launch>/, and nothing removed them. They go with their
// launch's record: a prune removes the folder of a launch whose record it pruned (or that was
// never recorded) once the folder is older than the cut-off and an hour; the folder of a launch
// still recorded, or a fresh one (a launch being prepared has no record yet), stays.
func TestPruneStaged(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d := &Daemon{stateDir: dir, db: db, log: discardLogger()}
	old := time.Now().Add(-48 * time.Hour)
	exit0 := 0
	launches := map[string]*store.Launch{
		"ended": {Launch: api.Launch{ID: "ended", Program: "/bin/true", Workspace: "/w", Engine: "native",
			State: api.StateExited, ExitCode: &exit0, Started: old, Ended: old, Settled: true}},
		"running": {Launch: api.Launch{ID: "running", Program: "/bin/true", Workspace: "/w", Engine: "native",
			State: api.StateRunning, Started: old}},
	}
	for _, l := range launches {
		if err := db.CreateLaunch(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for id, made := range map[string]time.Time{"ended": old, "running": old, "never-recorded": old,
		"preparing": time.Now(), "half-hour": time.Now().Add(-30 * time.Minute)} {
		p := filepath.Join(stagedDir(dir, id), "box", ".envrc")
		mustWriteFile(t, p, "kept copy\n")
		if err := os.Chtimes(stagedDir(dir, id), made, made); err != nil {
			t.Fatal(err)
		}
	}
	// A prune with the cut-off of `agentbox launches prune --older-than 0`: the ended launch's
	// record goes, and its left copies with it.
	before := time.Now()
	if n, err := db.PruneLaunches(ctx, before); err != nil || n != 1 {
		t.Fatalf("prune launches: %d %v", n, err)
	}
	d.pruneStaged(ctx, before)
	for id, want := range map[string]bool{"ended": false, "never-recorded": false, "running": true, "preparing": true, "half-hour": true} {
		_, err := os.Stat(stagedDir(dir, id))
		if got := err == nil; got != want {
			t.Errorf("staged/%s kept: %v, want %v (%v)", id, got, want, err)
		}
	}
}

func mustWriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
