package harnessstate

import (
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/profile"
)

// openCodeSchema is the part of OpenCode 1.18.34's database schema the edit reads and changes.
const openCodeSchema = `PRAGMA journal_mode=WAL;
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, commands text);
CREATE TABLE permission (id text PRIMARY KEY, project_id text NOT NULL REFERENCES project(id) ON DELETE CASCADE,
	action text NOT NULL, resource text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL);
CREATE UNIQUE INDEX permission_project_action_resource_idx ON permission (project_id, action, resource);
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, title text NOT NULL, permission text);
CREATE TABLE account (id text PRIMARY KEY, email text NOT NULL, url text NOT NULL);
CREATE TABLE control_account (email text NOT NULL, url text NOT NULL);`

func sqlDB(t *testing.T, path string, stmts ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return db
}

func column(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s.String)
	}
	return out
}

// TestPrepareOpenCode: before a launch, the box-owned OpenCode database keeps its sessions but
// loses what a box recorded that grants or runs something: the saved "always" answers but the
// host's (which are carried in), a session's own allow rules, a project's start commands,
// accounts, and a trigger that would put a rule back. The edit is made in place (the inode of
// the database running boxes have open is kept). A link a box left for the write-ahead log is
// removed, and the helper, confined to the state folder, cannot be made to write through one.
func TestPrepareOpenCode(t *testing.T) {
	set, err := profile.NewSet(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := set.Get("opencode")
	home, root := t.TempDir(), t.TempDir()
	dir := Dir(root, "opencode", "/w")
	// The host's own database: one saved answer, for the same project.
	hostDB := filepath.Join(home, ".local", "share", "opencode", "opencode.db")
	if err := os.MkdirAll(filepath.Dir(hostDB), 0o700); err != nil {
		t.Fatal(err)
	}
	sqlDB(t, hostDB, openCodeSchema, `INSERT INTO project VALUES ('p1', '/w', NULL)`,
		`INSERT INTO permission VALUES ('psv_h', 'p1', 'bash', 'git *', 1, 1)`)
	if _, err := Prepare(dir, p, home, "/w"); err != nil {
		t.Fatal(err)
	}
	boxDB := filepath.Join(dir, ".local", "share", "opencode", "opencode.db")
	if fi, err := os.Stat(boxDB); err != nil || fi.Size() != 0 {
		t.Fatalf("the database before OpenCode made one: %v, %v", fi, err)
	}
	// What boxes leave: a session, an "always" answer, a session rule that allows everything,
	// a start command, an account, and a trigger that adds a rule at the next session.
	box := sqlDB(t, boxDB, openCodeSchema,
		`INSERT INTO project VALUES ('p1', '/w', '{"start":"sh -c planted"}')`,
		`INSERT INTO session VALUES ('ses_1', 'p1', 'kept', '[{"permission":"*","pattern":"*","action":"allow"},{"permission":"bash","pattern":"rm *","action":"deny"}]')`,
		`INSERT INTO permission VALUES ('psv_b', 'p1', 'external_directory', '/tmp/*', 1, 1)`,
		`INSERT INTO account VALUES ('a', 'x@example.org', 'https://console.example.org')`,
		`CREATE TRIGGER planted AFTER INSERT ON session BEGIN INSERT INTO permission VALUES ('psv_t', 'p1', 'bash', '*', 1, 1); END`)
	box.Close()
	var st syscall.Stat_t
	syscall.Stat(boxDB, &st)
	ino := st.Ino

	if _, err := Prepare(dir, p, home, "/w"); err != nil {
		t.Fatal(err)
	}
	syscall.Stat(boxDB, &st)
	if st.Ino != ino {
		t.Errorf("the database was replaced (inode %d → %d), not edited in place", ino, st.Ino)
	}
	box = sqlDB(t, boxDB, `INSERT INTO session VALUES ('ses_2', 'p1', 'new', NULL)`)
	if got := column(t, box, `SELECT project_id || ' ' || action || ' ' || resource FROM permission ORDER BY 1`); !slices.Equal(got, []string{"p1 bash git *"}) {
		t.Errorf("saved answers: %q, want the host's only", got)
	}
	if got := column(t, box, `SELECT title || ' ' || ifnull(permission, '') FROM session WHERE id = 'ses_1'`); len(got) != 1 || strings.Contains(got[0], "allow") || !strings.Contains(got[0], `"deny"`) {
		t.Errorf("the session's own rules: %q, want the deny rule only", got)
	}
	if got := column(t, box, `SELECT ifnull(commands, '') FROM project`); !slices.Equal(got, []string{""}) {
		t.Errorf("the project's start commands: %q", got)
	}
	if got := column(t, box, `SELECT email FROM account`); len(got) != 0 {
		t.Errorf("accounts: %q", got)
	}
	if got := column(t, box, `SELECT name FROM sqlite_schema WHERE type IN ('trigger', 'view')`); len(got) != 0 {
		t.Errorf("triggers and views: %q", got)
	}
	box.Close()

	// A link a box left for the write-ahead log, to a file of the user's.
	victim := filepath.Join(home, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	wal := boxDB + "-wal"
	os.Remove(wal)
	if err := os.Symlink(victim, wal); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(dir, p, home, "/w"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(wal); err == nil && !fi.Mode().IsRegular() {
		t.Errorf("the link a box left for the write-ahead log is still there: %v", fi.Mode())
	}
	// A link slipped in for the database itself after Prepare's check (a box of the workspace
	// that runs now), to the host's own database: the helper, confined to the state folder,
	// cannot edit it (SQLite follows a link to the main database).
	os.Remove(boxDB)
	os.Remove(wal)
	os.Remove(boxDB + "-shm")
	if err := os.Symlink(hostDB, boxDB); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	cmd := exec.Command(exe, ScrubCommand, filepath.Dir(boxDB), "opencode.db")
	cmd.Stdin = strings.NewReader("[]")
	out, err := cmd.CombinedOutput()
	host := sqlDB(t, hostDB)
	if got := column(t, host, `SELECT action FROM permission`); !slices.Equal(got, []string{"bash"}) {
		t.Fatalf("the helper edited the host's database through a link (%v, %s): its saved answers are %q", err, out, got)
	}
	if err == nil {
		t.Errorf("the helper did not fail on a database it cannot open: %s", out)
	}

	// A host database that cannot be read carries nothing, and says so.
	os.Remove(boxDB)
	host.Close()
	os.Remove(hostDB + "-wal")
	os.Remove(hostDB + "-shm")
	if err := os.WriteFile(hostDB, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	warns, err := Prepare(dir, p, home, "/w")
	if err != nil || len(warns) != 1 || warns[0].File != hostDB {
		t.Errorf("a host database that cannot be read: warnings %v, %v; want one naming %s", warns, err, hostDB)
	}
}

// TestScrubOpenCodeTableCase: tables a box made with the names in another case (SQLite resolves
// OpenCode's lowercase names to them) are scrubbed as OpenCode's own (review 14, F3).
func TestScrubOpenCodeTableCase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opencode.db")
	schema := strings.NewReplacer("TABLE project", "TABLE Project", "TABLE permission", "TABLE PERMISSION",
		"TABLE session", "TABLE Session", "TABLE account", "TABLE ACCOUNT").Replace(openCodeSchema)
	db := sqlDB(t, path, schema, `CREATE TABLE Credential (id text, secret text)`,
		`INSERT INTO project VALUES ('p1', '/w', '{"start":"sh -c planted"}')`,
		`INSERT INTO permission VALUES ('psv_b', 'p1', 'external_directory', '/*', 1, 1)`,
		`INSERT INTO session VALUES ('ses_1', 'p1', 't', '[{"permission":"*","pattern":"*","action":"allow"}]')`,
		`INSERT INTO account VALUES ('a', 'x@example.org', 'https://console.example.org')`,
		`INSERT INTO credential VALUES ('c', 'secret')`)
	db.Close()
	if err := scrubOpenCode(path, nil); err != nil {
		t.Fatal(err)
	}
	db = sqlDB(t, path)
	for q, want := range map[string]int{
		`SELECT count(*) FROM permission`:                              0,
		`SELECT count(*) FROM session WHERE permission LIKE '%allow%'`: 0,
		`SELECT count(*) FROM project WHERE commands IS NOT NULL`:      0,
		`SELECT count(*) FROM account`:                                 0,
		`SELECT count(*) FROM credential`:                              0,
		`SELECT count(*) FROM session WHERE id = 'ses_1'`:              1,
	} {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil || n != want {
			t.Errorf("%s = %d, %v; want %d", q, n, err, want)
		}
	}
}
