//go:build linux

package e2e

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenCodeHostDBUnchangedByLaunch: launches of the opencode profile read the host's own
// OpenCode database (the saved answers they carry, opencode-db) and change none of the host's
// opencode.db* files, neither their bytes nor their time stamps, nor create one. The host's
// database is as OpenCode 1.18.34 leaves it when it exits: its write-ahead log and the log's
// index beside it, with a saved answer still in the log, which the second launch carries into
// the box-owned database. Against the previous read (a plain read-only SQLite connection) the
// index (opencode.db-shm) was rebuilt at every launch.
func TestOpenCodeHostDBUnchangedByLaunch(t *testing.T) {
	t.Parallel()
	e := standInEnv(t)
	hostDir := filepath.Join(e.Home, ".local", "share", "opencode")
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The host's database, its log and the log's index, copied as they are while a connection
	// holds them: the files an OpenCode that exited leaves.
	const schema = `PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;
		CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL, commands text);
		CREATE TABLE permission (id text PRIMARY KEY, project_id text NOT NULL, action text NOT NULL,
			resource text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL);`
	scratch := filepath.Join(t.TempDir(), "opencode.db")
	w, err := sql.Open("sqlite", scratch)
	if err != nil {
		t.Fatal(err)
	}
	w.SetMaxOpenConns(1)
	for _, q := range []string{schema, `INSERT INTO project VALUES ('p1', '/w', NULL)`, `PRAGMA wal_checkpoint(TRUNCATE)`,
		`INSERT INTO permission VALUES ('psv_h', 'p1', 'bash', 'host-answer *', 1, 1)`} {
		if _, err := w.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(scratch + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(hostDir, "opencode.db"+suffix), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	files := func() map[string]string {
		out := map[string]string{}
		ents, _ := os.ReadDir(hostDir)
		for _, d := range ents {
			b, err := os.ReadFile(filepath.Join(hostDir, d.Name()))
			fi, serr := os.Stat(filepath.Join(hostDir, d.Name()))
			if err != nil || serr != nil {
				t.Fatal(err, serr)
			}
			out[d.Name()] = fmt.Sprintf("%s %x", fi.ModTime().Format(time.RFC3339Nano), b)
		}
		return out
	}
	before := files()
	time.Sleep(20 * time.Millisecond) // a write after this shows in the time stamps
	runStandIn(t, e, "opencode", "#!/bin/sh\necho ran\n")
	// The box-owned database, as the first box's OpenCode would have made it, for the project
	// the host's answer is for.
	boxDB := filepath.Join(boxState(t, e, "opencode"), ".local", "share", "opencode", "opencode.db")
	b, err := sql.Open("sqlite", boxDB)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{schema, `INSERT INTO project VALUES ('p1', '/w', NULL)`} {
		if _, err := b.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	b.Close()
	runStandIn(t, e, "opencode", "#!/bin/sh\necho ran\n")

	after := files()
	for name, a := range after {
		if was, ok := before[name]; !ok {
			t.Errorf("a launch created the host's %s", name)
		} else if a != was {
			t.Errorf("a launch changed the host's %s (its bytes or its time stamp)", name)
		}
	}
	if len(after) != len(before) {
		t.Errorf("the host's OpenCode files were %d, are %d", len(before), len(after))
	}
	b, err = sql.Open("sqlite", boxDB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var got []string
	rows, err := b.Query(`SELECT resource FROM permission`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		got = append(got, s)
	}
	rows.Close()
	if strings.Join(got, ",") != "host-answer *" {
		t.Errorf("the box's saved answers are %q, want the host's, still in its log", got)
	}
}
