package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestSessionsPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agentbox.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Unix(1700000000, 0).UTC()
	r := Session{ID: "s_1", Hash: sha256.Sum256([]byte("pairing")), ClientID: "claude", LaunchID: "l1", Kind: "launch", State: "live", Created: now, LastUsed: now}
	if err := s.SaveSession(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.State, r.Ended = "revoked", now.Add(time.Minute)
	if err := s.SaveSession(ctx, r); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.LoadSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != r {
		t.Fatalf("reloaded %+v, want %+v", got, r)
	}
	if err := s.DeleteSession(ctx, "s_1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.LoadSessions(ctx); len(got) != 0 {
		t.Fatalf("after delete: %v", got)
	}
}

// TestCreateLaunchWithSession guards the launch's session saved in its record's commit: both or
// neither, and a record of the session saved before it (a revocation while the launch was
// being set up) is kept, never made live again.
func TestCreateLaunchWithSession(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agentbox.db"))
	live := Session{ID: "s_1", Hash: sha256.Sum256([]byte("p1")), ClientID: "claude", LaunchID: "l1", Kind: "launch", State: "live", Created: at, LastUsed: at}
	if err := s.CreateLaunch(ctx, newLaunch("l1"), live); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadSessions(ctx); err != nil || len(got) != 1 || got[0] != live {
		t.Fatalf("sessions after the launch's record: %+v %v, want %+v", got, err, live)
	}

	// The id is taken: neither the launch nor its session is saved.
	other := live
	other.ID, other.Hash = "s_2", sha256.Sum256([]byte("p2"))
	if err := s.CreateLaunch(ctx, newLaunch("l1"), other); !errors.Is(err, ErrExists) {
		t.Fatalf("a taken id: %v, want ErrExists", err)
	}
	if got, _ := s.LoadSessions(ctx); len(got) != 1 {
		t.Fatalf("a launch that was not recorded saved its session: %+v", got)
	}

	// Revoked (and saved) before the launch's record: the record keeps the revocation.
	revoked := live
	revoked.ID, revoked.Hash, revoked.LaunchID = "s_3", sha256.Sum256([]byte("p3")), "l3"
	revoked.State, revoked.Ended = "revoked", at.Add(time.Second)
	if err := s.SaveSession(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	stale := revoked
	stale.State, stale.Ended = "live", time.Time{}
	if err := s.CreateLaunch(ctx, newLaunch("l3"), stale); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if r.ID == revoked.ID && r != revoked {
			t.Fatalf("the launch's record overwrote a revocation: %+v, want %+v", r, revoked)
		}
	}
	if _, err := s.GetLaunch(ctx, "l3"); err != nil {
		t.Fatal(err)
	}
}
