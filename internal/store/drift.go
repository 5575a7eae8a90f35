package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// migrationDrift adds the integrity transitions of launches. A launch's drift flag is derived
// from its rows (any alert), so once set it never clears: rows are only ever added.
const migrationDrift = `CREATE TABLE drift (
		seq       INTEGER PRIMARY KEY AUTOINCREMENT,
		launch_id TEXT NOT NULL,
		time_ns   INTEGER NOT NULL,
		kind      TEXT NOT NULL CHECK (kind IN ('modified', 'replaced', 'created', 'removed')),
		path      TEXT NOT NULL,
		detail    TEXT NOT NULL DEFAULT '',
		source    TEXT NOT NULL DEFAULT '',
		alert     INTEGER NOT NULL DEFAULT 1
	);
	CREATE INDEX drift_by_launch ON drift (launch_id, seq);`

// AddDrift records one integrity transition of launch id (e.Time zero means now). Recording
// an alert raises the launch's drift flag for good.
func (s *Store) AddDrift(ctx context.Context, id string, e api.DriftEvent) error {
	if id == "" || e.Kind == "" || e.Path == "" {
		return errors.New("store: add drift: launch id, kind and path are required")
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO drift (launch_id, time_ns, kind, path, detail, source, alert)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, id, e.Time.UnixNano(), e.Kind, e.Path, e.Detail, e.Source, e.Alert)
	if err != nil {
		return fmt.Errorf("store: add drift for launch %s: %w", id, err)
	}
	return nil
}

// Drift returns launch id's drift flag and its most recent transitions (at most
// api.MaxDriftEvents), oldest first.
func (s *Store) Drift(ctx context.Context, id string) (bool, []api.DriftEvent, error) {
	m, err := s.driftOf(ctx, []string{id})
	if err != nil {
		return false, nil, err
	}
	d := m[id]
	return d.flag, d.events, nil
}

type launchDrift struct {
	flag   bool
	events []api.DriftEvent
}

// attachDrift fills Drift and DriftEvents of ls.
func (s *Store) attachDrift(ctx context.Context, ls []*Launch) error {
	if len(ls) == 0 {
		return nil
	}
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.ID
	}
	m, err := s.driftOf(ctx, ids)
	if err != nil {
		return err
	}
	for _, l := range ls {
		d := m[l.ID]
		l.Drift, l.DriftEvents = d.flag, d.events
	}
	return nil
}

func (s *Store) driftOf(ctx context.Context, ids []string) (map[string]launchDrift, error) {
	out := map[string]launchDrift{}
	// SQLite bounds the number of parameters: query in chunks.
	for len(ids) > 0 {
		n := min(len(ids), 500)
		chunk := ids[:n]
		ids = ids[n:]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, `SELECT launch_id, time_ns, kind, path, detail, source, alert FROM (
			SELECT *, ROW_NUMBER() OVER (PARTITION BY launch_id ORDER BY seq DESC) AS n FROM drift
			WHERE launch_id IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)) WHERE n <= `+fmt.Sprint(api.MaxDriftEvents)+`
			ORDER BY launch_id, time_ns, n DESC`, args...)
		if err != nil {
			return nil, fmt.Errorf("drift: %w", err)
		}
		for rows.Next() {
			var id string
			var t int64
			var e api.DriftEvent
			if err := rows.Scan(&id, &t, &e.Kind, &e.Path, &e.Detail, &e.Source, &e.Alert); err != nil {
				rows.Close()
				return nil, fmt.Errorf("drift: %w", err)
			}
			e.Time = time.Unix(0, t)
			d := out[id]
			d.events = append(d.events, e)
			out[id] = d
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("drift: %w", err)
		}
		// The flag counts every alert, also those older than the events returned.
		rows, err = s.db.QueryContext(ctx, `SELECT DISTINCT launch_id FROM drift WHERE alert = 1 AND launch_id IN (?`+
			strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("drift: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("drift: %w", err)
			}
			d := out[id]
			d.flag = true
			out[id] = d
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("drift: %w", err)
		}
	}
	return out, nil
}
