package store

import (
	"context"
	"crypto/sha256"
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
