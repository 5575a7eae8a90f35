// Package store is the daemon's durable memory: an SQLite database (pure Go, WAL) holding
// launches, so that a restarted daemon can re-adopt its boxes, and an audit log; sessions
// (hashes only) and violations come in later schema versions.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/api"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// Error classes, checked with errors.Is.
var (
	// ErrNotFound means no launch has the given id.
	ErrNotFound = errors.New("not found")
	// ErrExists means a launch with the given id is already recorded.
	ErrExists = errors.New("already exists")
	// ErrTransition means a launch's state cannot change as asked (e.g. exited → running).
	ErrTransition = errors.New("invalid state transition")
	// ErrCorrupt means the database file is damaged or is not an agentbox database. The store
	// never resets it: the file stays for the user to inspect or move aside.
	ErrCorrupt = errors.New("database corrupt")
	// ErrTooNew means the database was written by a newer agentbox (a higher schema version).
	ErrTooNew = errors.New("database schema is newer than this agentbox")
)

// Launch is one launch as recorded: the API's view plus what the daemon needs to re-adopt the
// box after a restart.
type Launch struct {
	api.Launch
	// LaunchDir is the launch directory (R/launches/<id>); "" until created.
	LaunchDir string
	// ShimStartTime is the start time of the shim process (field 22 of /proc/<pid>/stat, in
	// clock ticks since boot). With ShimPid it identifies the shim across pid reuse; 0 until set.
	ShimStartTime uint64
	// BoxPidNS is the inode of the box's pid namespace; 0 until the box runs.
	BoxPidNS uint64
}

// Transition is a change of a launch's state, applied by Store.Transition.
type Transition struct {
	// To is the new state (api.StateRunning, …).
	To string
	// BoxPid and BoxPidNS, when non-zero, record the box's top process and pid namespace.
	BoxPid   int
	BoxPidNS uint64
	// ExitCode is the program's exit code; required for api.StateExited, refused otherwise.
	ExitCode *int
	// Error says why the launch failed; required for api.StateFailed, optional for
	// api.StateLost, refused otherwise.
	Error *api.Error
	// Ended is when the launch ended (terminal states); the zero value means now.
	Ended time.Time
	// Stages, when not nil, records the stages of the launch's start (api.Launch.Stages);
	// nil leaves them as they are.
	Stages []api.Stage
}

// transitions lists, for each state, the states a launch in it may move to. exited, failed and
// lost are final.
var transitions = map[string][]string{
	api.StateStarting: {api.StateRunning, api.StateExited, api.StateFailed, api.StateLost},
	api.StateRunning:  {api.StateExited, api.StateLost},
}

func terminal(state string) bool {
	return state == api.StateExited || state == api.StateFailed || state == api.StateLost
}

// Filter selects launches for ListLaunches. The zero value selects all.
type Filter struct {
	// States keeps launches in one of these states; nil means any state.
	States []string
	// Workspace keeps launches of this workspace; "" means any.
	Workspace string
	// Limit caps the number of launches returned (newest first); 0 means no cap.
	Limit int
	// HideProbes drops the launches of agentbox's own escape probe (`attack-probe`, what
	// `agentbox selftest` and the attack tests run); false keeps them.
	HideProbes bool
}

// Audit is one entry of the audit log.
type Audit struct {
	// Seq orders entries; assigned by AddAudit.
	Seq int64
	// Time is when it happened; the zero value means now.
	Time time.Time
	// LaunchID is the launch the entry is about; "" for daemon-wide events.
	LaunchID string
	// Kind names the event ("launch.start", "session.revoke", …).
	Kind string
	// Detail is a JSON object with the event's specifics; nil means {}.
	Detail json.RawMessage

	// synced, on a marker queued by AuditWriter.Sync (no row), is closed once the rows queued
	// before it are committed.
	synced chan struct{}
}

// Store is an open database. Its methods are safe for concurrent use, also by several
// processes on the same file (SQLite serializes writers; busy_timeout waits).
type Store struct {
	db   *sql.DB
	path string
}

// busyTimeout is how long a writer waits for another writer's lock before failing.
const busyTimeout = 5 * time.Second

// Open opens (creating it 0600 if absent) the database at path and migrates it to the current
// schema. A file that is not a healthy SQLite database is refused with ErrCorrupt naming it;
// it is never reset.
//
// The database runs in WAL mode with synchronous=FULL: agentbox writes a handful of rows per
// launch, so an fsync per commit costs nothing noticeable, and in exchange a committed launch
// record or audit entry survives a power cut (with NORMAL, WAL mode may lose the last commits).
func Open(path string) (*Store, error) {
	if err := prepareFile(path); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busyTimeout.Milliseconds()))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_foreign_keys", "1")
	// Write transactions take the write lock at BEGIN, so two writers never deadlock upgrading
	// read locks (which busy_timeout cannot resolve).
	q.Set("_txlock", "immediate")
	dsn := (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// SQLite has one writer at a time: a handful of connections serve the daemon's readers,
	// and a burst of writers waits for a connection instead of opening one (and a file
	// descriptor, kept until the pool closes) each.
	db.SetMaxOpenConns(maxOpenConns)
	db.SetMaxIdleConns(maxOpenConns)
	s := &Store{db: db, path: path}
	if err := s.check(); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// maxOpenConns bounds the store's SQLite connections.
const maxOpenConns = 4

// prepareFile creates the database file 0600 so that SQLite (which gives the -wal and -shm
// files the database's mode) never makes it world-readable, and refuses anything but a
// regular file.
func prepareFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f.Close()
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("store: open %s: not a regular file", path)
	}
	return nil
}

// check runs SQLite's quick integrity check, which also fails on a file that is not a database.
func (s *Store) check() error {
	rows, err := s.db.Query("PRAGMA quick_check")
	if err != nil {
		return s.corrupt(err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return s.corrupt(err)
		}
		if r != "ok" {
			problems = append(problems, r)
		}
	}
	if err := rows.Err(); err != nil {
		return s.corrupt(err)
	}
	if len(problems) > 0 {
		return s.corruptf(strings.Join(problems, "; "))
	}
	return nil
}

// corrupt classifies an error met while reading the file's structure: SQLite's NOTADB and
// CORRUPT codes become ErrCorrupt; anything else (permissions, I/O) stays what it is.
func (s *Store) corrupt(err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) || (se.Code()&0xff != sqlite3.SQLITE_NOTADB && se.Code()&0xff != sqlite3.SQLITE_CORRUPT) {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	return s.corruptf(err.Error())
}

func (s *Store) corruptf(reason string) error {
	return fmt.Errorf("store: %w: %s: %s (agentbox will not reset it; move it aside to start afresh, or inspect it with sqlite3)",
		ErrCorrupt, s.path, reason)
}

// migrations are the schema versions in order: migrations[i] takes user_version i to i+1.
// A released migration is never edited; a change is a new entry.
var migrations = []string{
	// 1: launches and audit.
	`CREATE TABLE launches (
		id              TEXT PRIMARY KEY,
		program         TEXT NOT NULL,
		args            TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(args)),
		profile         TEXT NOT NULL DEFAULT '',
		workspace       TEXT NOT NULL,
		engine          TEXT NOT NULL,
		state           TEXT NOT NULL CHECK (state IN ('starting', 'running', 'exited', 'failed', 'lost')),
		detached        INTEGER NOT NULL DEFAULT 0,
		launch_dir      TEXT NOT NULL DEFAULT '',
		shim_pid        INTEGER NOT NULL DEFAULT 0,
		shim_start_time INTEGER NOT NULL DEFAULT 0,
		box_pid         INTEGER NOT NULL DEFAULT 0,
		box_pidns       INTEGER NOT NULL DEFAULT 0,
		started_ns      INTEGER NOT NULL,
		ended_ns        INTEGER,
		exit_code       INTEGER,
		settled         INTEGER NOT NULL DEFAULT 0,
		error_code      TEXT,
		error_message   TEXT,
		error_hint      TEXT
	);
	CREATE INDEX launches_by_state ON launches (state, settled);
	CREATE INDEX launches_by_started ON launches (started_ns);
	CREATE TABLE audit (
		seq       INTEGER PRIMARY KEY AUTOINCREMENT,
		time_ns   INTEGER NOT NULL,
		launch_id TEXT NOT NULL DEFAULT '',
		kind      TEXT NOT NULL,
		detail    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(detail))
	);
	CREATE INDEX audit_by_launch ON audit (launch_id, seq);`,
	// 2: pairing sessions, hashes only (never a pairing).
	`CREATE TABLE sessions (
		id        TEXT PRIMARY KEY,
		hash      BLOB NOT NULL CHECK (length(hash) = 32),
		client_id TEXT NOT NULL DEFAULT '',
		launch_id TEXT NOT NULL DEFAULT '',
		kind      TEXT NOT NULL,
		state     TEXT NOT NULL,
		created_ns   INTEGER NOT NULL,
		last_used_ns INTEGER NOT NULL,
		ended_ns     INTEGER NOT NULL DEFAULT 0
	);
	CREATE INDEX sessions_by_launch ON sessions (launch_id);`,
	// 3: integrity drift (drift.go).
	migrationDrift,
	// 4: the managed posture a launch started under (posture.go).
	migrationPosture,
	// 5: wrap mode's violations (violations.go).
	migrationViolations,
	// 6: the stages of a launch's start (stages.go).
	migrationStages,
}

// SchemaVersion returns the schema version (PRAGMA user_version) this build writes.
func SchemaVersion() int { return len(migrations) }

func (s *Store) migrate() error {
	ctx := context.Background()
	for {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("store: migrate %s: %w", s.path, err)
		}
		var v int
		if err := tx.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
			tx.Rollback()
			return s.corrupt(err)
		}
		if v > len(migrations) {
			tx.Rollback()
			return fmt.Errorf("store: %w: %s has version %d, this agentbox knows up to %d (upgrade agentbox)",
				ErrTooNew, s.path, v, len(migrations))
		}
		if v == len(migrations) {
			return tx.Rollback()
		}
		if _, err := tx.Exec(migrations[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migrate %s to version %d: %w", s.path, v+1, err)
		}
		if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
			tx.Rollback()
			return fmt.Errorf("store: migrate %s to version %d: %w", s.path, v+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("store: migrate %s to version %d: %w", s.path, v+1, err)
		}
	}
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// CreateLaunch records a new launch. l.ID, Program, Workspace and Engine are required; an
// empty State means starting and a zero Started means now. It fails with ErrExists when the id
// is taken.
//
// The sessions, when given, are saved in the same commit (the launch's pairing session,
// created unsaved: one fsync instead of two on the launch's path), each unless a record with
// its id exists already: a revocation saved meanwhile is kept, never made live again. Nothing
// is saved when the launch is not.
func (s *Store) CreateLaunch(ctx context.Context, l *Launch, sessions ...Session) error {
	if l.ID == "" || l.Program == "" || l.Workspace == "" || l.Engine == "" {
		return fmt.Errorf("store: create launch %q: id, program, workspace and engine are required", l.ID)
	}
	if l.State == "" {
		l.State = api.StateStarting
	}
	if l.Started.IsZero() {
		l.Started = time.Now()
	}
	args := l.Args
	if args == nil {
		args = []string{}
	}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("store: create launch %s: %w", l.ID, err)
	}
	var code, msg, hint sql.NullString
	if l.Error != nil {
		code, msg, hint = nullString(l.Error.Code), sql.NullString{String: l.Error.Message, Valid: true}, nullString(l.Error.Hint)
	}
	posture, err := postureJSON(l.Posture)
	if err != nil {
		return fmt.Errorf("store: create launch %s: posture: %w", l.ID, err)
	}
	stages, err := stagesJSON(l.Stages)
	if err != nil {
		return fmt.Errorf("store: create launch %s: stages: %w", l.ID, err)
	}
	insert := func(ctx context.Context, db execer) error {
		_, err := db.ExecContext(ctx, `INSERT INTO launches (id, program, args, profile, workspace, engine, state, detached,
			launch_dir, shim_pid, shim_start_time, box_pid, box_pidns, started_ns, ended_ns, exit_code, settled,
			error_code, error_message, error_hint, posture, stages)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			l.ID, l.Program, string(argsJSON), l.Profile, l.Workspace, l.Engine, l.State, l.Detached,
			l.LaunchDir, l.ShimPid, int64(l.ShimStartTime), l.BoxPid, int64(l.BoxPidNS), l.Started.UnixNano(),
			nullTime(l.Ended), nullInt(l.ExitCode), l.Settled, code, msg, hint, posture, stages)
		return err
	}
	if len(sessions) == 0 {
		err = insert(ctx, s.db)
	} else {
		var tx *sql.Tx
		if tx, err = s.db.BeginTx(ctx, nil); err == nil {
			err = insert(ctx, tx)
			for _, r := range sessions {
				if err == nil {
					err = insertSession(ctx, tx, r)
				}
			}
			if err == nil {
				err = tx.Commit()
			} else if rerr := tx.Rollback(); rerr != nil {
				err = fmt.Errorf("%w (rollback: %v)", err, rerr)
			}
		}
	}
	if err != nil {
		if isConstraint(err) {
			if _, gerr := s.GetLaunch(ctx, l.ID); gerr == nil {
				return fmt.Errorf("store: create launch %s: %w", l.ID, ErrExists)
			}
		}
		return fmt.Errorf("store: create launch %s: %w", l.ID, err)
	}
	return nil
}

// SetShim records the shim's pid and start time (see Launch.ShimStartTime).
func (s *Store) SetShim(ctx context.Context, id string, pid int, startTime uint64) error {
	return s.update(ctx, id, "set shim", `UPDATE launches SET shim_pid = ?, shim_start_time = ? WHERE id = ?`,
		pid, int64(startTime), id)
}

// SetLaunchDir records the launch directory.
func (s *Store) SetLaunchDir(ctx context.Context, id, dir string) error {
	return s.update(ctx, id, "set launch dir", `UPDATE launches SET launch_dir = ? WHERE id = ?`, dir, id)
}

// SetSettled records that no process of the launch's box remains (verified by the caller).
// Only a launch in a final state can be settled.
func (s *Store) SetSettled(ctx context.Context, id string) error {
	return s.inTx(ctx, "settle launch "+id, func(tx *sql.Tx) error {
		state, err := stateOf(ctx, tx, id)
		if err != nil {
			return err
		}
		if !terminal(state) {
			return fmt.Errorf("%w: a %s launch cannot be settled", ErrTransition, state)
		}
		_, err = tx.ExecContext(ctx, `UPDATE launches SET settled = 1 WHERE id = ?`, id)
		return err
	})
}

// Transition moves launch id to t.To. Allowed: starting → running, exited, failed or lost;
// running → exited or lost. Anything else fails with ErrTransition and changes nothing.
func (s *Store) Transition(ctx context.Context, id string, t Transition) error {
	if err := t.check(id); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return s.inTx(ctx, "launch "+id+" to "+t.To, func(tx *sql.Tx) error {
		from, err := stateOf(ctx, tx, id)
		if err != nil {
			return err
		}
		return transition(ctx, tx, id, from, t)
	})
}

// check refuses a transition whose outcome does not fit its final state.
func (t Transition) check(id string) error {
	switch {
	case t.To == api.StateExited && t.ExitCode == nil:
		return fmt.Errorf("launch %s to exited: %w: an exit code is required", id, ErrTransition)
	case t.To != api.StateExited && t.ExitCode != nil:
		return fmt.Errorf("launch %s to %s: %w: only an exited launch has an exit code", id, t.To, ErrTransition)
	case t.To == api.StateFailed && t.Error == nil:
		return fmt.Errorf("launch %s to failed: %w: an error is required", id, ErrTransition)
	case t.Error != nil && t.To != api.StateFailed && t.To != api.StateLost:
		return fmt.Errorf("launch %s to %s: %w: only a failed or lost launch has an error", id, t.To, ErrTransition)
	}
	return nil
}

// transition moves launch id from state from (read in tx) to t.To, within tx.
func transition(ctx context.Context, tx *sql.Tx, id, from string, t Transition) error {
	allowed := false
	for _, to := range transitions[from] {
		allowed = allowed || to == t.To
	}
	if !allowed {
		return fmt.Errorf("%w: %s → %s", ErrTransition, from, t.To)
	}
	sets := []string{"state = ?"}
	args := []any{t.To}
	if t.BoxPid != 0 {
		sets, args = append(sets, "box_pid = ?"), append(args, t.BoxPid)
	}
	if t.BoxPidNS != 0 {
		sets, args = append(sets, "box_pidns = ?"), append(args, int64(t.BoxPidNS))
	}
	if terminal(t.To) {
		ended := t.Ended
		if ended.IsZero() {
			ended = time.Now()
		}
		sets, args = append(sets, "ended_ns = ?"), append(args, ended.UnixNano())
	}
	if t.ExitCode != nil {
		sets, args = append(sets, "exit_code = ?"), append(args, *t.ExitCode)
	}
	if t.Error != nil {
		sets = append(sets, "error_code = ?", "error_message = ?", "error_hint = ?")
		args = append(args, nullString(t.Error.Code), t.Error.Message, nullString(t.Error.Hint))
	}
	if t.Stages != nil {
		st, err := stagesJSON(t.Stages)
		if err != nil {
			return err
		}
		sets, args = append(sets, "stages = ?"), append(args, st)
	}
	args = append(args, id)
	_, err := tx.ExecContext(ctx, "UPDATE launches SET "+strings.Join(sets, ", ")+" WHERE id = ?", args...)
	return err
}

// SetRunning records that the program runs (starting → running) in the box whose top process
// is boxPid, and the stages of the launch's start (nil leaves them as they are).
func (s *Store) SetRunning(ctx context.Context, id string, boxPid int, stages []api.Stage) error {
	return s.Transition(ctx, id, Transition{To: api.StateRunning, BoxPid: boxPid, Stages: stages})
}

// Finish records a launch's outcome in one step from the daemon's record of it: l.State (a
// final state) with l.ExitCode or l.Error, l.Ended, l.BoxPid and l.Settled, in one commit (one
// fsync on the path from the box's exit to the client's end, where the transition and the
// settlement took two). Moving into the final state follows Transition's rules; when the launch
// is already in l.State, Finish only updates its settlement, so recording an outcome twice is
// harmless.
func (s *Store) Finish(ctx context.Context, l *Launch) error {
	if !terminal(l.State) {
		return fmt.Errorf("store: finish launch %s: %w: %q is not a final state", l.ID, ErrTransition, l.State)
	}
	t := Transition{To: l.State, BoxPid: l.BoxPid, BoxPidNS: l.BoxPidNS, ExitCode: l.ExitCode, Error: l.Error,
		Ended: l.Ended, Stages: l.Stages}
	if err := t.check(l.ID); err != nil {
		return fmt.Errorf("store: finish launch %s: %w", l.ID, err)
	}
	return s.inTx(ctx, "finish launch "+l.ID, func(tx *sql.Tx) error {
		from, err := stateOf(ctx, tx, l.ID)
		if err != nil {
			return err
		}
		if from != l.State {
			if err := transition(ctx, tx, l.ID, from, t); err != nil {
				return err
			}
		}
		if l.Settled {
			_, err = tx.ExecContext(ctx, `UPDATE launches SET settled = 1 WHERE id = ?`, l.ID)
		}
		return err
	})
}

// update runs a single-row UPDATE and maps "no row" to ErrNotFound.
func (s *Store) update(ctx context.Context, id, what, query string, args ...any) error {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("store: %s %s: %w", what, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: %s %s: %w", what, id, err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s %s: launch %w", what, id, ErrNotFound)
	}
	return nil
}

func (s *Store) inTx(ctx context.Context, what string, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if err := fn(tx); err != nil {
		if rerr := tx.Rollback(); rerr != nil {
			return fmt.Errorf("store: %s: %w (rollback: %v)", what, err, rerr)
		}
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: %s: commit: %w", what, err)
	}
	return nil
}

func stateOf(ctx context.Context, tx *sql.Tx, id string) (string, error) {
	var state string
	err := tx.QueryRowContext(ctx, `SELECT state FROM launches WHERE id = ?`, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("launch %w", ErrNotFound)
	}
	return state, err
}

const launchColumns = `id, program, args, profile, workspace, engine, state, detached, launch_dir, shim_pid,
	shim_start_time, box_pid, box_pidns, started_ns, ended_ns, exit_code, settled, error_code, error_message, error_hint, stages`

// GetLaunch returns launch id, or ErrNotFound.
func (s *Store) GetLaunch(ctx context.Context, id string) (*Launch, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+launchColumns+` FROM launches WHERE id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("store: get launch %s: %w", id, err)
	}
	ls, err := scanLaunches(rows)
	if err == nil {
		err = s.attachDrift(ctx, ls)
	}
	if err == nil {
		err = s.attachPosture(ctx, ls)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get launch %s: %w", id, err)
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("store: get launch %s: %w", id, ErrNotFound)
	}
	return ls[0], nil
}

// ListLaunches returns the launches f selects, newest first.
func (s *Store) ListLaunches(ctx context.Context, f Filter) ([]*Launch, error) {
	var where []string
	var args []any
	if len(f.States) > 0 {
		where = append(where, "state IN (?"+strings.Repeat(", ?", len(f.States)-1)+")")
		for _, st := range f.States {
			args = append(args, st)
		}
	}
	if f.Workspace != "" {
		where, args = append(where, "workspace = ?"), append(args, f.Workspace)
	}
	if f.HideProbes {
		// args is the JSON array of the arguments: the probe's first is its command.
		where, args = append(where, "json_extract(args, '$[0]') IS NOT ?"), append(args, ProbeCommand)
	}
	return s.list(ctx, "list launches", where, args, f.Limit)
}

// ProbeCommand is the first argument of a launch of agentbox's escape probe (attack.ProbeCommand;
// the store does not link the attack battery).
const ProbeCommand = "attack-probe"

// PruneLaunches deletes the records of the launches that ended before before: exited, failed
// or lost, with their settlement verified (an unsettled one is still re-adopted by a restarted
// daemon), and their drift events. The audit log keeps its entries. It returns how many
// launches it deleted.
func (s *Store) PruneLaunches(ctx context.Context, before time.Time) (int, error) {
	var n int
	err := s.inTx(ctx, "prune launches", func(tx *sql.Tx) error {
		const ended = `SELECT id FROM launches WHERE state IN ('exited', 'failed', 'lost') AND settled = 1
			AND COALESCE(ended_ns, started_ns) < ?`
		if _, err := tx.ExecContext(ctx, `DELETE FROM drift WHERE launch_id IN (`+ended+`)`, before.UnixNano()); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM launches WHERE id IN (`+ended+`)`, before.UnixNano())
		if err != nil {
			return err
		}
		k, err := res.RowsAffected()
		n = int(k)
		return err
	})
	return n, err
}

// PruneAudit deletes the audit rows written before before, except those of launches still
// to be re-adopted (running, or ended and not settled), whose counters a restarted daemon
// sums from them. It returns how many rows it deleted.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM audit WHERE time_ns < ? AND launch_id NOT IN
		(SELECT id FROM launches WHERE state IN ('starting', 'running') OR settled = 0)`, before.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("store: prune audit: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: prune audit: %w", err)
	}
	return int(n), nil
}

// Running returns the launches a restarted daemon must re-adopt: those starting or running,
// and those that ended but whose settlement (no process of the box left) is not yet verified.
// Oldest first.
func (s *Store) Running(ctx context.Context) ([]*Launch, error) {
	ls, err := s.list(ctx, "running launches", []string{"(state IN ('starting', 'running') OR settled = 0)"}, nil, 0)
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(ls)-1; i < j; i, j = i+1, j-1 {
		ls[i], ls[j] = ls[j], ls[i]
	}
	return ls, nil
}

func (s *Store) list(ctx context.Context, what string, where []string, args []any, limit int) ([]*Launch, error) {
	q := `SELECT ` + launchColumns + ` FROM launches`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY started_ns DESC, id DESC"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	ls, err := scanLaunches(rows)
	if err == nil {
		err = s.attachDrift(ctx, ls)
	}
	if err == nil {
		err = s.attachPosture(ctx, ls)
	}
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return ls, nil
}

func scanLaunches(rows *sql.Rows) ([]*Launch, error) {
	defer rows.Close()
	var out []*Launch
	for rows.Next() {
		var (
			l                Launch
			args             string
			shimStart, pidns int64
			started          int64
			ended, exit      sql.NullInt64
			code, msg, hint  sql.NullString
			stages           sql.NullString
		)
		if err := rows.Scan(&l.ID, &l.Program, &args, &l.Profile, &l.Workspace, &l.Engine, &l.State, &l.Detached,
			&l.LaunchDir, &l.ShimPid, &shimStart, &l.BoxPid, &pidns, &started, &ended, &exit, &l.Settled,
			&code, &msg, &hint, &stages); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(args), &l.Args); err != nil {
			return nil, fmt.Errorf("launch %s: args: %w", l.ID, err)
		}
		if len(l.Args) == 0 {
			l.Args = nil
		}
		l.ShimStartTime, l.BoxPidNS = uint64(shimStart), uint64(pidns)
		l.Started = time.Unix(0, started)
		if ended.Valid {
			l.Ended = time.Unix(0, ended.Int64)
		}
		if exit.Valid {
			c := int(exit.Int64)
			l.ExitCode = &c
		}
		if msg.Valid {
			l.Error = &api.Error{Code: code.String, Message: msg.String, Hint: hint.String}
		}
		st, err := parseStages(l.ID, stages)
		if err != nil {
			return nil, err
		}
		l.Stages = st
		out = append(out, &l)
	}
	return out, rows.Err()
}

// AddAudit appends an entry to the audit log and sets a.Seq (and a.Time when it was zero).
func (s *Store) AddAudit(ctx context.Context, a *Audit) error {
	if a.Kind == "" {
		return errors.New("store: add audit: kind is required")
	}
	detail := a.Detail
	if detail == nil {
		detail = json.RawMessage("{}")
	}
	if !json.Valid(detail) {
		return fmt.Errorf("store: add audit %s: detail is not valid JSON", a.Kind)
	}
	if a.Time.IsZero() {
		a.Time = time.Now()
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO audit (time_ns, launch_id, kind, detail) VALUES (?, ?, ?, ?)`,
		a.Time.UnixNano(), a.LaunchID, a.Kind, string(detail))
	if err != nil {
		return fmt.Errorf("store: add audit %s: %w", a.Kind, err)
	}
	if a.Seq, err = res.LastInsertId(); err != nil {
		return fmt.Errorf("store: add audit %s: %w", a.Kind, err)
	}
	a.Detail = detail
	return nil
}

// ListAudit returns the audit entries of launchID ("" for all entries), oldest first.
func (s *Store) ListAudit(ctx context.Context, launchID string) ([]Audit, error) {
	q := `SELECT seq, time_ns, launch_id, kind, detail FROM audit`
	var args []any
	if launchID != "" {
		q, args = q+` WHERE launch_id = ?`, append(args, launchID)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	defer rows.Close()
	var out []Audit
	for rows.Next() {
		var a Audit
		var t int64
		var detail string
		if err := rows.Scan(&a.Seq, &t, &a.LaunchID, &a.Kind, &detail); err != nil {
			return nil, fmt.Errorf("store: list audit: %w", err)
		}
		a.Time, a.Detail = time.Unix(0, t), json.RawMessage(detail)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	return out, nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func nullTime(t time.Time) sql.NullInt64 {
	return sql.NullInt64{Int64: t.UnixNano(), Valid: !t.IsZero()}
}

func nullInt(p *int) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: int64(*p), Valid: true}
}

// isConstraint reports whether err is an SQLite constraint violation.
func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}
