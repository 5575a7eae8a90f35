package harnessstate

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/profile"
)

// openCodeWriterEnv names the host database a test binary started with it writes to, as the
// host's OpenCode would (openCodeWriter).
const openCodeWriterEnv = "AGENTBOX_TEST_OPENCODE_WRITER"

// openCodeWriter is the test binary run as a host OpenCode holding its database open: it adds
// a saved answer (left in the write-ahead log), says "ready", and, when its second argument is
// "busy", replaces in a loop, one transaction each, the pair of answers "n-a" and "n-b" with
// the next pair, checkpointing the log every 10 transactions, until its standard input closes.
func openCodeWriter(path, mode string) int {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`INSERT INTO permission VALUES ('psv_live', 'p1', 'bash', 'live *', 1, 1)`); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	for i := 1; ; i++ {
		select {
		case <-done:
			return 0
		default:
		}
		if mode != "busy" {
			<-done
			return 0
		}
		q := fmt.Sprintf(`BEGIN IMMEDIATE; DELETE FROM permission WHERE resource LIKE 'pair-%%';
			INSERT INTO permission VALUES ('psv_%[1]da', 'p1', 'bash', 'pair-%[1]d-a', 1, 1);
			INSERT INTO permission VALUES ('psv_%[1]db', 'p1', 'bash', 'pair-%[1]d-b', 1, 1); COMMIT;`, i)
		if _, err := db.Exec(q); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if i%10 == 0 {
			db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
		}
	}
}

// hostDBFiles returns the host database's files (opencode.db*) by name, with their bytes and
// modification times.
func hostDBFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "opencode.db") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		fi, serr := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		out[e.Name()] = fmt.Sprintf("%s %x", fi.ModTime().Format(time.RFC3339Nano), b)
	}
	return out
}

// sameHostDBFiles fails the test unless the host database's files are those of before.
func sameHostDBFiles(t *testing.T, when string, before, after map[string]string) {
	t.Helper()
	for name, a := range after {
		if b, ok := before[name]; !ok {
			t.Errorf("%s: the launch created the host's %s", when, name)
		} else if a != b {
			t.Errorf("%s: the launch changed the host's %s (its bytes or time stamp)", when, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			t.Errorf("%s: the launch removed the host's %s", when, name)
		}
	}
}

// TestOpenCodeHostDBUntouched: the launch's read of the host's OpenCode database (the saved
// answers it carries, opencode-db) writes and creates none of the host's opencode.db* files,
// whether the host's OpenCode has exited and left its write-ahead log and index (as 1.18.34
// does), never left a log, or runs and holds the database open; and the answers still in the
// log are read. Against the previous read (a plain read-only connection) the index's bytes and
// time stamp changed at every launch (SQLite rebuilt it, and recorded its reader there), and
// without a log SQLite created one and its index.
func TestOpenCodeHostDBUntouched(t *testing.T) {
	set, err := profile.NewSet(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := set.Get("opencode")
	home, root := t.TempDir(), t.TempDir()
	dir := Dir(root, "opencode", "/w")
	hostDir := filepath.Join(home, ".local", "share", "opencode")
	hostDB := filepath.Join(hostDir, "opencode.db")
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A box database for the scrub to carry the answers into.
	boxDB := filepath.Join(dir, ".local", "share", "opencode", "opencode.db")
	if err := os.MkdirAll(filepath.Dir(boxDB), 0o700); err != nil {
		t.Fatal(err)
	}
	sqlDB(t, boxDB, openCodeSchema, `INSERT INTO project VALUES ('p1', '/w', NULL)`).Close()

	launch := func(when string, want ...string) {
		t.Helper()
		time.Sleep(20 * time.Millisecond) // a write now would show in the time stamps
		before := hostDBFiles(t, hostDir)
		warns, err := Prepare(dir, p, home, "/w")
		if err != nil || len(warns) > 0 {
			t.Fatalf("%s: %v, warnings %v", when, err, warns)
		}
		sameHostDBFiles(t, when, before, hostDBFiles(t, hostDir))
		box := sqlDB(t, boxDB)
		if got := column(t, box, `SELECT resource FROM permission ORDER BY 1`); !slices.Equal(got, want) {
			t.Errorf("%s: the answers carried are %q, want %q", when, got, want)
		}
		box.Close()
	}

	// The host's OpenCode exited, leaving its log (an answer in it, not checkpointed) and the
	// log's index: the files of a database open in another process, copied as they are.
	scratch := filepath.Join(t.TempDir(), "opencode.db")
	w := sqlDB(t, scratch, openCodeSchema, `PRAGMA wal_autocheckpoint=0`, `INSERT INTO project VALUES ('p1', '/w', NULL)`,
		`INSERT INTO permission VALUES ('psv_h', 'p1', 'bash', 'git *', 1, 1)`, `PRAGMA wal_checkpoint(TRUNCATE)`,
		`INSERT INTO permission VALUES ('psv_w', 'p1', 'bash', 'in-wal *', 1, 1)`)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(scratch + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hostDB+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	launch("the host's OpenCode exited", "git *", "in-wal *")
	launch("again", "git *", "in-wal *")

	// The host's OpenCode runs: another process holds the database open.
	cmd, stdin := startOpenCodeWriter(t, hostDB, "idle")
	launch("the host's OpenCode runs", "git *", "in-wal *", "live *")
	stdin.Close()
	cmd.Wait()

	// No log at all: everything is in the database file (checkpointed, the log removed).
	c := sqlDB(t, hostDB, `PRAGMA journal_mode=DELETE`, `INSERT INTO permission VALUES ('psv_d', 'p1', 'bash', 'no-wal *', 1, 1)`, `PRAGMA journal_mode=WAL`)
	c.Close()
	if _, err := os.Stat(hostDB + "-wal"); err == nil {
		t.Fatalf("the log is still there")
	}
	launch("no log", "git *", "in-wal *", "live *", "no-wal *")
}

// TestOpenCodeHostDBWhileWritten: while a host OpenCode writes its database without pause
// (transactions that each replace one pair of saved answers with the next, and checkpoints),
// every read of it by a launch either fails, carrying nothing, or sees one state of it: the
// fixed answers and exactly one whole pair. No read crashes or carries a torn state.
func TestOpenCodeHostDBWhileWritten(t *testing.T) {
	hostDB := filepath.Join(t.TempDir(), "opencode.db")
	sqlDB(t, hostDB, openCodeSchema, `INSERT INTO project VALUES ('p1', '/w', NULL)`,
		`INSERT INTO permission VALUES ('psv_h', 'p1', 'bash', 'git *', 1, 1)`).Close()
	cmd, stdin := startOpenCodeWriter(t, hostDB, "busy")
	defer func() { stdin.Close(); cmd.Wait() }()
	ok, failed, pairs := 0, 0, map[string]bool{}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		rules, err := openCodeHostRules(hostDB)
		if err != nil {
			failed++
			continue
		}
		var res []string
		for _, r := range rules {
			res = append(res, r.Resource)
		}
		slices.Sort(res)
		if len(res) == 2 {
			ok++ // before the writer's first pair
			continue
		}
		if len(res) != 4 || res[0] != "git *" || res[1] != "live *" || !strings.HasSuffix(res[2], "-a") ||
			res[3] != strings.TrimSuffix(res[2], "-a")+"-b" {
			t.Fatalf("a read carried a state the database never had: %q", res)
		}
		pairs[res[2]] = true
		ok++
	}
	t.Logf("%d reads saw one state (%d different pairs), %d failed", ok, len(pairs), failed)
	if len(pairs) < 2 {
		t.Errorf("the reads saw %d of the writer's states: it did not write meanwhile", len(pairs))
	}
}

// startOpenCodeWriter starts the test binary as a host OpenCode writing hostDB (openCodeWriter)
// and waits until it is ready; closing the returned writer ends it.
func startOpenCodeWriter(t *testing.T, hostDB, mode string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run", "^$")
	cmd.Env = append(os.Environ(), openCodeWriterEnv+"="+hostDB+" "+mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("the writer did not start: %q, %v, %s", l, err, stderr.String())
	}
	return cmd, stdin
}
