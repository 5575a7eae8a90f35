package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Session is a stored pairing session: its SHA-256 hash and metadata. The pairing itself is
// never stored.
type Session struct {
	ID       string
	Hash     [32]byte
	ClientID string
	LaunchID string
	Kind     string
	State    string
	Created  time.Time
	LastUsed time.Time
	Ended    time.Time // zero while live
}

func nsOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// SaveSession inserts or replaces a session record.
func (s *Store) SaveSession(ctx context.Context, r Session) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions (id, hash, client_id, launch_id, kind, state, created_ns, last_used_ns, ended_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET state = excluded.state, last_used_ns = excluded.last_used_ns, ended_ns = excluded.ended_ns`,
		r.ID, r.Hash[:], r.ClientID, r.LaunchID, r.Kind, r.State, nsOf(r.Created), nsOf(r.LastUsed), nsOf(r.Ended))
	if err != nil {
		return fmt.Errorf("store: save session %s: %w", r.ID, err)
	}
	return nil
}

// execer is what runs a statement: the database or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// insertSession saves a new session record unless one with its id exists (CreateLaunch).
func insertSession(ctx context.Context, db execer, r Session) error {
	_, err := db.ExecContext(ctx, `INSERT INTO sessions (id, hash, client_id, launch_id, kind, state, created_ns, last_used_ns, ended_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`,
		r.ID, r.Hash[:], r.ClientID, r.LaunchID, r.Kind, r.State, nsOf(r.Created), nsOf(r.LastUsed), nsOf(r.Ended))
	if err != nil {
		return fmt.Errorf("save session %s: %w", r.ID, err)
	}
	return nil
}

// DeleteSession removes a session record.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
		return fmt.Errorf("store: delete session %s: %w", id, err)
	}
	return nil
}

// LoadSessions returns every stored session record.
func (s *Store) LoadSessions(ctx context.Context) ([]Session, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, hash, client_id, launch_id, kind, state, created_ns, last_used_ns, ended_ns FROM sessions ORDER BY created_ns`)
	if err != nil {
		return nil, fmt.Errorf("store: load sessions: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var r Session
		var hash []byte
		var created, used, ended int64
		if err := rows.Scan(&r.ID, &hash, &r.ClientID, &r.LaunchID, &r.Kind, &r.State, &created, &used, &ended); err != nil {
			return nil, fmt.Errorf("store: load sessions: %w", err)
		}
		if len(hash) != len(r.Hash) {
			return nil, fmt.Errorf("store: load sessions: %s: %w: hash of %d bytes", r.ID, ErrCorrupt, len(hash))
		}
		copy(r.Hash[:], hash)
		r.Created, r.LastUsed, r.Ended = timeOf(created), timeOf(used), timeOf(ended)
		out = append(out, r)
	}
	return out, rows.Err()
}
