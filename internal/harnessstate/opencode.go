package harnessstate

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite" (pure Go)
)

// OpenCode 1.18.34 keeps its sessions and what the user allowed "always" in one SQLite database,
// ~/.local/share/opencode/opencode.db (write-ahead log beside it), box-owned state as a whole:
// `opencode --continue` resumes a session from it. What in it grants a permission, runs a
// program or sends requests elsewhere is dropped before every launch, so that no box grants
// a later box of the workspace what the user did not grant on the host:
//
//   - permission: the "always" answers (project, action such as bash or external_directory,
//     resource pattern), applied without asking. Only the host's own rows pass (read from the
//     host's database, the user's); a box's are deleted.
//   - session.permission: a session's own rules, which win over the agent's when the session
//     is resumed: the rules that allow are removed, those that ask or deny are kept.
//   - project.commands: the start command OpenCode runs for a project's new workspaces.
//   - account, account_state, control_account, credential: accounts and connector
//     credentials, whose URLs OpenCode fetches configuration from; a box has none of the host's.
//   - every trigger and view: OpenCode defines none, and a trigger would put a rule back on
//     the next box's first write, a view stand in for a table.
//
// The edit is made in place (the boxes of the workspace that run now have the file open) by a
// helper process confined by Landlock to the state folder (scrub_linux.go): the database is
// the box's, and a file a box crafted must not steer what the daemon writes, nor where.

// openCodeRule is one saved "always" answer of OpenCode's permission table.
type openCodeRule struct {
	Project  string `json:"project"`
	Action   string `json:"action"`
	Resource string `json:"resource"`
}

// openCodeDB prepares the box's OpenCode database rel beneath root (dir): the box's journal
// files that are not regular files are removed (a link would send SQLite's writes elsewhere),
// the host's saved answers are read from home, and the helper edits the box's database.
func openCodeDB(dir string, root *os.Root, rel, home string) (*Warning, error) {
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		st, err := root.Lstat(rel + suffix)
		if err == nil && !st.Mode().IsRegular() {
			if err := root.RemoveAll(rel + suffix); err != nil {
				return nil, err
			}
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	hostPath := filepath.Join(home, rel)
	rules, herr := openCodeHostRules(hostPath)
	var warn *Warning
	if herr != nil {
		warn = &Warning{File: hostPath, Err: herr, What: "the permissions you allowed always"}
	}
	if st, err := root.Stat(rel); err != nil || st.Size() == 0 {
		return warn, err // a database OpenCode has not written yet
	}
	return warn, runScrub(filepath.Join(dir, filepath.Dir(rel)), filepath.Base(rel), rules)
}

// openCodeHostRules reads the saved answers of the host's own OpenCode database (nil when it
// has none) without writing or creating any of its files (hostDBQuery).
func openCodeHostRules(path string) ([]openCodeRule, error) {
	for try := 0; ; try++ {
		before, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		query, immutable, err := hostDBQuery(path)
		if err != nil {
			return nil, err
		}
		rules, err := readOpenCodeRules(path, query)
		if !immutable {
			return rules, err
		}
		// SQLite takes no lock on a database it is told is immutable: a checkpoint of a host
		// OpenCode started meanwhile may have written the file while it was read, and what was
		// read is then not one state of it. Read again (a few times), else carry nothing.
		if after, serr := os.Stat(path); serr == nil && sameFile(before, after) {
			return rules, err
		}
		if try == 2 {
			return nil, errors.New("it changed while it was read (an OpenCode on the host writes it); not carried this time")
		}
	}
}

// hostDBQuery returns the URI query under which the host's OpenCode database at path is read
// so that none of its files is written or created, and whether it is read as immutable.
// SQLite's own read-only connection does both: a reader records its place in the write-ahead
// log's index (-shm), rebuilding that file when no process has it open (as when OpenCode has
// exited and left it), and creates the log and its index when the database is in WAL mode
// and they are absent. So:
//
//   - with the log and its index (OpenCode 1.18.34 leaves both, running or not): the index is
//     opened read-only (readonly_shm), and SQLite reads the log itself into its own memory,
//     checked frame by frame, under its usual locks, retrying while a writer moves it, and
//     failing (SQLITE_PROTOCOL) rather than reading a torn state: a consistent snapshot,
//     recent answers in the log included;
//   - without a log (all is in the database file): read as immutable (no lock, no other file),
//     and the caller checks that the file did not change meanwhile;
//   - a log without its index is refused (SQLite would make the index): nothing is carried.
func hostDBQuery(path string) (query string, immutable bool, err error) {
	_, werr := os.Lstat(path + "-wal")
	_, serr := os.Lstat(path + "-shm")
	const common = "mode=ro&_pragma=busy_timeout(5000)&_pragma=trusted_schema(0)"
	switch {
	case werr == nil && serr == nil:
		return common + "&readonly_shm=1", false, nil
	case errors.Is(werr, fs.ErrNotExist):
		return common + "&immutable=1", true, nil
	case werr != nil:
		return "", false, werr
	default:
		return "", false, fmt.Errorf("%s-shm: %w (a write-ahead log without its index, which reading would create)", filepath.Base(path), serr)
	}
}

// sameFile reports whether a and b, two looks at one path, show the same unchanged file.
func sameFile(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// readOpenCodeRules reads the permission table of the database at path, opened with query.
func readOpenCodeRules(path, query string) ([]openCodeRule, error) {
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", OmitHost: true, Path: path, RawQuery: query}).String())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	// One read transaction for both queries: one snapshot.
	tx, err := db.Begin()
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'permission'`).Scan(&n); err != nil || n == 0 {
		return nil, err
	}
	rows, err := tx.Query(`SELECT project_id, action, resource FROM permission`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []openCodeRule
	for rows.Next() {
		var r openCodeRule
		if err := rows.Scan(&r.Project, &r.Action, &r.Resource); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scrubOpenCode edits the OpenCode database at path in place, in one transaction (see above):
// the box's saved answers but the host's (rules) are deleted, and the host's are inserted for
// the projects the database knows.
func scrubOpenCode(path string, rules []openCodeRule) (err error) {
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", OmitHost: true, Path: path,
		RawQuery: "mode=rw&_defensive=1&_pragma=busy_timeout(10000)&_pragma=trusted_schema(0)&_pragma=temp_store(memory)&_txlock=immediate"}).String())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	kinds := map[string]string{}
	var drop []string
	rows, err := tx.Query(`SELECT type, name FROM sqlite_schema WHERE type IN ('table', 'view', 'trigger')`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var kind, name string
		if err := rows.Scan(&kind, &name); err != nil {
			rows.Close()
			return err
		}
		if kind == "table" {
			// SQLite matches table names without regard to ASCII case: OpenCode's
			// `FROM permission` reads a table a box made as PERMISSION.
			kinds[asciiLower(name)] = kind
		} else {
			drop = append(drop, fmt.Sprintf("DROP %s IF EXISTS %s", kind, quoteIdent(name)))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, q := range drop {
		if _, err := tx.Exec(q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	if kinds["permission"] != "" {
		keep, _ := json.Marshal(rules)
		if _, err := tx.Exec(`DELETE FROM permission WHERE NOT EXISTS (SELECT 1 FROM json_each(?) AS h
			WHERE h.value ->> '$.project' = permission.project_id AND h.value ->> '$.action' = permission.action
			AND h.value ->> '$.resource' = permission.resource)`, string(keep)); err != nil {
			return fmt.Errorf("permission: %w", err)
		}
		if kinds["project"] != "" {
			for _, r := range rules {
				sum := sha256.Sum256([]byte(r.Project + "\x00" + r.Action + "\x00" + r.Resource))
				if _, err := tx.Exec(`INSERT OR IGNORE INTO permission (id, project_id, action, resource, time_created, time_updated)
					SELECT ?, id, ?, ?, 0, 0 FROM project WHERE id = ?`, "psv_agentbox"+hex.EncodeToString(sum[:8]), r.Action, r.Resource, r.Project); err != nil {
					return fmt.Errorf("permission: %w", err)
				}
			}
		}
	}
	if kinds["session"] != "" {
		if err := scrubSessionRules(tx); err != nil {
			return fmt.Errorf("session: %w", err)
		}
	}
	if kinds["project"] != "" {
		if _, err := tx.Exec(`UPDATE project SET commands = NULL WHERE commands IS NOT NULL`); err != nil {
			return fmt.Errorf("project: %w", err)
		}
	}
	for _, t := range []string{"account_state", "account", "control_account", "credential"} {
		if kinds[t] != "" {
			if _, err := tx.Exec("DELETE FROM " + quoteIdent(t)); err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
		}
	}
	return tx.Commit()
}

// scrubSessionRules removes the rules that allow from each session's own permission rules
// (a JSON array of {permission, pattern, action}); a value that is not such an array is
// cleared.
func scrubSessionRules(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT id, permission FROM session WHERE permission IS NOT NULL`)
	if err != nil {
		return err
	}
	type change struct {
		id  string
		val any
	}
	var changes []change
	for rows.Next() {
		var id string
		var raw sql.NullString
		if err := rows.Scan(&id, &raw); err != nil {
			rows.Close()
			return err
		}
		var rules []map[string]any
		if json.Unmarshal([]byte(raw.String), &rules) != nil {
			changes = append(changes, change{id, nil})
			continue
		}
		kept := rules[:0]
		for _, r := range rules {
			if a, ok := r["action"].(string); ok && (a == "ask" || a == "deny") {
				kept = append(kept, r)
			}
		}
		if len(kept) != len(rules) {
			b, _ := json.Marshal(kept)
			changes = append(changes, change{id, string(b)})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range changes {
		if _, err := tx.Exec(`UPDATE session SET permission = ? WHERE id = ?`, c.val, c.id); err != nil {
			return err
		}
	}
	return nil
}

// asciiLower folds ASCII upper case only, as SQLite does for identifiers.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// quoteIdent quotes an SQL identifier.
func quoteIdent(s string) string {
	b := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return string(append(b, '"'))
}
