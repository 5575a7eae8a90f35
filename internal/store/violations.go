package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// migrationViolations adds wrap mode's violations: managed programs found running outside
// every box. Rows are only ever added.
const migrationViolations = `CREATE TABLE violations (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		time_ns    INTEGER NOT NULL,
		program    TEXT NOT NULL,
		path       TEXT NOT NULL,
		pid        INTEGER NOT NULL,
		start_time INTEGER NOT NULL DEFAULT 0,
		exe        TEXT NOT NULL DEFAULT '',
		ppid       INTEGER NOT NULL DEFAULT 0,
		parent_exe TEXT NOT NULL DEFAULT '',
		uid        INTEGER NOT NULL,
		cmdline    TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(cmdline)),
		action     TEXT NOT NULL CHECK (action IN ('reported', 'terminated', 'terminate_failed')),
		error      TEXT NOT NULL DEFAULT ''
	);
	CREATE INDEX violations_by_time ON violations (time_ns);`

// AddViolation records v (v.Time zero means now) and returns its id.
func (s *Store) AddViolation(ctx context.Context, v api.Violation) (int64, error) {
	if v.Program == "" || v.Path == "" || v.Pid <= 0 || v.Action == "" {
		return 0, errors.New("store: add violation: program, path, pid and action are required")
	}
	if v.Time.IsZero() {
		v.Time = time.Now()
	}
	cmd := v.Cmdline
	if cmd == nil {
		cmd = []string{}
	}
	cb, err := json.Marshal(cmd)
	if err != nil {
		return 0, err
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO violations (time_ns, program, path, pid, start_time, exe, ppid, parent_exe, uid, cmdline, action, error)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.Time.UnixNano(), v.Program, v.Path, v.Pid, int64(v.StartTime), v.Exe, v.PPid, v.ParentExe, v.UID, string(cb), v.Action, v.Error)
	if err != nil {
		return 0, fmt.Errorf("store: add violation: %w", err)
	}
	return res.LastInsertId()
}

// ViolationCounts returns how many violations are recorded and how many of them were killed.
func (s *Store) ViolationCounts(ctx context.Context) (total, terminated int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(action = 'terminated'), 0) FROM violations`).Scan(&total, &terminated)
	if err != nil {
		return 0, 0, fmt.Errorf("store: count violations: %w", err)
	}
	return total, terminated, nil
}

// Violations returns the latest violations, newest first (at most limit; limit <= 0 means 50).
func (s *Store) Violations(ctx context.Context, limit int) ([]api.Violation, error) {
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, time_ns, program, path, pid, start_time, exe, ppid, parent_exe, uid, cmdline, action, error
		FROM violations ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list violations: %w", err)
	}
	defer rows.Close()
	var out []api.Violation
	for rows.Next() {
		var v api.Violation
		var ns, start int64
		var cmd sql.NullString
		if err := rows.Scan(&v.ID, &ns, &v.Program, &v.Path, &v.Pid, &start, &v.Exe, &v.PPid, &v.ParentExe, &v.UID, &cmd, &v.Action, &v.Error); err != nil {
			return nil, fmt.Errorf("store: list violations: %w", err)
		}
		v.Time, v.StartTime = time.Unix(0, ns), uint64(start)
		if cmd.Valid {
			if err := json.Unmarshal([]byte(cmd.String), &v.Cmdline); err != nil {
				return nil, fmt.Errorf("store: violation %d: cmdline: %w", v.ID, err)
			}
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
