package daemon

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/integrity"
)

// TestSweepUnrecordedPlaceholders: placeholders held by a launch the daemon does not know (a
// daemon killed between making them and recording the launch) are removed when a daemon
// starts; those of a known launch stay.
func TestSweepUnrecordedPlaceholders(t *testing.T) {
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := &integrity.Registry{Path: filepath.Join(t.TempDir(), "placeholders.json")}
	ghost := filepath.Join(home, "auth.json")
	live := filepath.Join(home, ".env")
	if _, err := reg.Hold("ghost", []integrity.Placeholder{{Path: ghost, Beneath: home, Private: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Hold("live", []integrity.Placeholder{{Path: live, Beneath: home, Private: true}}); err != nil {
		t.Fatal(err)
	}
	b := &integrityBroker{integrityDeps: integrityDeps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, reg: reg}
	b.sweep(func(id string) bool { return id == "live" })
	if _, err := os.Lstat(ghost); err == nil {
		t.Errorf("the unrecorded launch's placeholder %s was left", ghost)
	}
	if _, err := os.Lstat(live); err != nil {
		t.Errorf("the known launch's placeholder %s was removed: %v", live, err)
	}
	if hs, _ := reg.Holders(); len(hs) != 1 || hs[0] != "live" {
		t.Errorf("holders after the sweep: %v, want [live]", hs)
	}
}
