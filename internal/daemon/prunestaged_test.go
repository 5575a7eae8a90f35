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
// could not collect are left in staged/<launch>/, and nothing removed them; nor the proposed
// changes in changes/<launch>/ of a launch whose record was pruned (issue #20: only the record
// leads `agentbox changes` and `apply` to them). Both go with their launch's record: a prune
// removes the folders of a launch whose record it pruned (or that was never recorded) once they
// are older than the cut-off and an hour; those of a launch still recorded, or fresh ones (a
// launch being prepared has no record yet), stay.
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
		for _, f := range []string{stagedDir(dir, id), changesDir(dir, id)} {
			mustWriteFile(t, filepath.Join(f, ".envrc"), "kept copy\n")
			if err := os.Chtimes(f, made, made); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A prune with the cut-off of `agentbox launches prune --older-than 0`: the ended launch's
	// record goes, and its left copies with it.
	before := time.Now()
	if n, err := db.PruneLaunches(ctx, before); err != nil || n != 1 {
		t.Fatalf("prune launches: %d %v", n, err)
	}
	d.pruneLaunchFolders(ctx, before)
	for id, want := range map[string]bool{"ended": false, "never-recorded": false, "running": true, "preparing": true, "half-hour": true} {
		for _, f := range []string{stagedDir(dir, id), changesDir(dir, id)} {
			_, err := os.Stat(f)
			if got := err == nil; got != want {
				t.Errorf("%s kept: %v, want %v (%v)", f, got, want, err)
			}
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
