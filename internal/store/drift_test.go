package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

func TestDriftFlagNeverClears(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"a", "b"} {
		if err := s.CreateLaunch(ctx, &Launch{Launch: api.Launch{ID: id, Program: "sh", Workspace: "/w", Engine: "native"}}); err != nil {
			t.Fatal(err)
		}
	}
	// A watched-only transition (HEAD) is recorded without raising the flag.
	if err := s.AddDrift(ctx, "a", api.DriftEvent{Kind: "replaced", Path: "/w/.git/HEAD", Source: "inotify"}); err != nil {
		t.Fatal(err)
	}
	l, err := s.GetLaunch(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if l.Drift || len(l.DriftEvents) != 1 {
		t.Fatalf("after a HEAD move: drift %v, events %v", l.Drift, l.DriftEvents)
	}
	if err := s.AddDrift(ctx, "a", api.DriftEvent{Kind: "modified", Path: "/w/.git/config", Detail: "content", Source: "periodic", Alert: true}); err != nil {
		t.Fatal(err)
	}
	// A reversal is another transition; the flag stays.
	if err := s.AddDrift(ctx, "a", api.DriftEvent{Kind: "modified", Path: "/w/.git/config", Detail: "content", Source: "exit", Alert: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddDrift(ctx, "a", api.DriftEvent{Kind: "bogus", Path: "/x"}); err == nil {
		t.Error("unknown kind accepted")
	}
	ls, err := s.ListLaunches(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		switch l.ID {
		case "a":
			if !l.Drift || len(l.DriftEvents) != 3 || l.DriftEvents[0].Path != "/w/.git/HEAD" || l.DriftEvents[2].Source != "exit" {
				t.Errorf("launch a: drift %v events %+v", l.Drift, l.DriftEvents)
			}
		case "b":
			if l.Drift || l.DriftEvents != nil {
				t.Errorf("launch b: drift %v events %+v", l.Drift, l.DriftEvents)
			}
		}
	}
	for i := 0; i < api.MaxDriftEvents+5; i++ {
		if err := s.AddDrift(ctx, "b", api.DriftEvent{Kind: "replaced", Path: "/w/.git/HEAD"}); err != nil {
			t.Fatal(err)
		}
	}
	if flag, ev, err := s.Drift(ctx, "b"); err != nil || flag || len(ev) != api.MaxDriftEvents {
		t.Errorf("launch b: flag %v, %d events, %v", flag, len(ev), err)
	}
}
