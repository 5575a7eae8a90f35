package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

// TestPostureRecorded guards that the posture a launch started under is kept with it, and
// that a launch without one reads back nil (not an empty, "unlocked" posture).
func TestPostureRecorded(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	p := &api.Posture{Source: api.PostureSourceFile, Files: []string{"/etc/claude-code/managed-settings.json"}, AllowManagedHooksOnly: true}
	if err := s.CreateLaunch(ctx, &Launch{Launch: api.Launch{ID: "a1", Program: "claude", Workspace: "/w", Engine: "native", Profile: "claude", Posture: p}}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateLaunch(ctx, &Launch{Launch: api.Launch{ID: "b2", Program: "sh", Workspace: "/w", Engine: "native"}}); err != nil {
		t.Fatal(err)
	}
	l, err := s.GetLaunch(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if l.Posture == nil || l.Posture.Source != api.PostureSourceFile || !l.Posture.AllowManagedHooksOnly || l.Posture.Files[0] != p.Files[0] {
		t.Errorf("posture %+v, want %+v", l.Posture, p)
	}
	ls, err := s.ListLaunches(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if (l.ID == "a1") != (l.Posture != nil) {
			t.Errorf("launch %s posture %+v", l.ID, l.Posture)
		}
	}
}
