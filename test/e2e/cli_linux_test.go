package e2e

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"

	_ "modernc.org/sqlite" // the store's driver: ageEndedLaunches
)

// TestDoctorWithoutDaemon: with no daemon running, doctor runs the readiness probe itself (it
// printed an empty state "from the daemon" and exited 1), and starts no daemon.
func TestDoctorWithoutDaemon(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.Run("", "doctor")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "readiness: ready (engine native, from the probe by agentbox doctor)") {
		t.Errorf("doctor without a daemon: exit %d, stdout:\n%s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "✓ ") || strings.Contains(r.Stdout, "✗ ") {
		t.Errorf("doctor did not list the probe's facts as checked:\n%s", r.Stdout)
	}
	r = e.Run("", "doctor", "--json")
	var rd api.Readiness
	if err := json.Unmarshal([]byte(r.Stdout), &rd); err != nil || r.Code != 0 || rd.State != api.ReadinessReady || len(rd.Facts) == 0 {
		t.Errorf("doctor --json without a daemon: exit %d, %v: %s", r.Code, err, r.Stdout)
	}
	if pid := e.DaemonPid(); pid != 0 {
		t.Errorf("doctor started a daemon (pid %d)", pid)
	}
}

// TestLaunchesListing: launches lists the last 20 by default without the escape probe's
// launches, --limit, --all, --state and --selftest select, and prune and launches.retention
// delete the records of ended launches (never a running one).
func TestLaunchesListing(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	const ended = 23
	for i := 0; i < ended; i++ {
		if r := e.Run("", "run", "true", "--", "--launch", itoa(i)); r.Code != 0 {
			t.Fatalf("run true: exit %d: %s", r.Code, r.Stderr)
		}
	}
	// A launch of agentbox's own escape probe, as selftest makes them (it exits at once: no
	// attempt named).
	e.Run("", "run", probeBin(t), "--", "attack-probe")
	running := e.Detach("sleep", "--", "600")
	e.WaitLaunch(running, "running", func(l api.Launch) bool { return l.State == api.StateRunning })

	list := func(args ...string) []api.Launch {
		t.Helper()
		r := e.Run("", append([]string{"launches", "--json"}, args...)...)
		var ls []api.Launch
		if err := json.Unmarshal([]byte(r.Stdout), &ls); r.Code != 0 || err != nil {
			t.Fatalf("launches --json %v: exit %d, %v: %s %s", args, r.Code, err, r.Stdout, r.Stderr)
		}
		return ls
	}
	probes := func(ls []api.Launch) int {
		n := 0
		for _, l := range ls {
			if len(l.Args) > 0 && l.Args[0] == "attack-probe" {
				n++
			}
		}
		return n
	}
	ls := list()
	if len(ls) != 20 || probes(ls) != 0 || ls[0].ID != running {
		t.Errorf("launches: %d listed (want 20), %d of the probe (want 0), first %s (want the newest, %s)", len(ls), probes(ls), ls[0].ID, running)
	}
	if r := e.Run("", "launches"); !strings.Contains(r.Stderr, "the 20 most recent; --limit N or --all for more") {
		t.Errorf("launches did not say that it lists the 20 most recent: %q", r.Stderr)
	} else {
		for _, line := range strings.Split(r.Stdout, "\n") {
			if n := len([]rune(line)); n > 200 {
				t.Errorf("a line of %d columns:\n%s", n, line)
			}
		}
	}
	if ls = list("--limit", "5"); len(ls) != 5 {
		t.Errorf("--limit 5: %d listed", len(ls))
	}
	if ls = list("--all"); len(ls) != ended+2 || probes(ls) != 1 {
		t.Errorf("--all: %d listed (want %d), %d of the probe (want 1)", len(ls), ended+2, probes(ls))
	}
	if ls = list("--selftest", "--limit", "100"); len(ls) != ended+2 || probes(ls) != 1 {
		t.Errorf("--selftest: %d listed (want %d), %d of the probe (want 1)", len(ls), ended+2, probes(ls))
	}
	if ls = list("--state", "running"); len(ls) != 1 || ls[0].ID != running {
		t.Errorf("--state running: %d listed, want the one running", len(ls))
	}
	if ls = list("--state", "exited,failed", "--limit", "100"); len(ls) != ended {
		var states []string
		for _, l := range list("--all") {
			states = append(states, fmt.Sprintf("%s %s %v %+v", l.ID[:12], l.State, l.Args, l.Error))
		}
		t.Errorf("--state exited,failed: %d listed, want %d; every launch:\n%s", len(ls), ended, strings.Join(states, "\n"))
	}
	for _, bad := range [][]string{{"--state", "done"}, {"--limit", "0"}, {"--all", "--limit", "3"}, {"prune", "--older-than", "-1h"}} {
		r := e.Run("", append([]string{"launches"}, bad...)...)
		if r.Code != 125 || !strings.Contains(r.Stderr, strings.TrimPrefix(bad[len(bad)-2], "prune")) {
			t.Errorf("launches %v: exit %d, stderr %q; want 125 naming the flag", bad, r.Code, r.Stderr)
		}
	}

	// prune: nothing ended more than an hour ago; then every ended launch, the running one kept.
	if r := e.Run("", "launches", "prune", "--older-than", "1h", "--json"); r.Code != 0 || !strings.Contains(r.Stdout, `"pruned": 0`) {
		t.Errorf("prune --older-than 1h: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if r := e.Run("", "launches", "prune"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "pruned "+itoa(ended+1)+" launch record(s)") {
		t.Errorf("prune: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if ls = list("--all"); len(ls) != 1 || ls[0].ID != running {
		t.Errorf("after prune: %d listed, want only the running launch", len(ls))
	}

	// launches.retention: the daemon deletes older records when it starts. The retention is at
	// least 1h (a shorter one would take a launch's proposed changes before they could be
	// reviewed), so the test ages the ended launch's record in the store while no daemon runs.
	if r := e.Run("", "run", "true"); r.Code != 0 {
		t.Fatalf("run true: exit %d: %s", r.Code, r.Stderr)
	}
	os.MkdirAll(filepath.Join(e.Config, "agentbox"), 0o700)
	if err := os.WriteFile(filepath.Join(e.Config, "agentbox", "config.yaml"), []byte("launches:\n  retention: 1ns\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("", "config", "validate"); r.Code == 0 || !strings.Contains(r.Stderr, "config.yaml:2:14: launches.retention: invalid value 1ns (allowed: 1h to 87600h)") {
		t.Errorf("config validate with launches.retention 1ns: exit %d: %s; want the file, line and field named", r.Code, r.Stderr)
	}
	if err := os.WriteFile(filepath.Join(e.Config, "agentbox", "config.yaml"), []byte("launches:\n  retention: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("", "daemon", "stop"); r.Code != 0 {
		t.Fatalf("daemon stop: exit %d: %s", r.Code, r.Stderr)
	}
	ageEndedLaunches(t, filepath.Join(e.State, "agentbox", "agentbox.db"), 2*time.Hour)
	if r := e.Run("", "daemon", "--detach"); r.Code != 0 {
		t.Fatalf("daemon --detach: exit %d: %s", r.Code, r.Stderr)
	}
	eventually(t, "the ended launch pruned by launches.retention", func() bool {
		ls := list("--all")
		return len(ls) == 1 && ls[0].ID == running
	})
}

// TestVersionMismatch: version (and info) print the CLI's and the daemon's versions, and warn,
// with how to restart the daemon, when an agentbox of another version talks to it; so does run
// (issue #18: a CLI newer than the running daemon used it silently), not when they match.
func TestVersionMismatch(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.Run("", "version")
	if r.Code != 0 || !strings.Contains(r.Stdout, "daemon   not running") || r.Stderr != "" {
		t.Errorf("version without a daemon: exit %d: %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if pid := e.DaemonPid(); pid != 0 {
		t.Errorf("version started a daemon (pid %d)", pid)
	}
	if r := e.Run("", "daemon", "--detach"); r.Code != 0 {
		t.Fatalf("daemon --detach: exit %d: %s", r.Code, r.Stderr)
	}
	cur := strings.TrimPrefix(strings.TrimSpace(e.Run("", "--version").Stdout), "agentbox version ")
	r = e.Run("", "version")
	if r.Code != 0 || !strings.Contains(r.Stdout, "agentbox "+cur+"\ndaemon   "+cur+" (pid ") || r.Stderr != "" {
		t.Errorf("version, same daemon: exit %d: %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := e.Run("", "run", "true"); r.Code != 0 || strings.Contains(r.Stderr, "warning: the running daemon") {
		t.Errorf("run, same daemon: exit %d: %q", r.Code, r.Stderr)
	}

	// An agentbox of another version: this binary with its version string replaced (same
	// length, so the binary stays whole), as after an upgrade of the CLI under a running daemon.
	b, err := os.ReadFile(agentboxBin)
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("9", len(cur))
	if cur == other {
		other = strings.Repeat("8", len(cur))
	}
	if bytes.Count(b, []byte(cur)) == 0 {
		t.Fatalf("the version %q is not in %s", cur, agentboxBin)
	}
	b = bytes.ReplaceAll(b, []byte(cur), []byte(other))
	dir := filepath.Join(e.Root, "upgraded")
	os.Mkdir(dir, 0o755)
	bin := filepath.Join(dir, "agentbox")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// A child forked by a parallel test between WriteFile's open and close holds the file open
	// for writing until it execs, and an exec of the file meanwhile fails with ETXTBSY (seen
	// once in CI): wait until it runs.
	eventually(t, "the upgraded binary to be executable", func() bool {
		err := exec.Command(bin, "--version").Run()
		return !errors.Is(err, syscall.ETXTBSY)
	})
	run := func(args ...string) Result {
		c := e.Command(t.Context(), args...)
		c.Path, c.Args[0] = bin, bin
		return e.RunCmd(c)
	}
	for _, args := range [][]string{{"version"}, {"info"}, {"version", "--json"}, {"run", "true"}} {
		r := run(args...)
		if r.Code != 0 || !strings.Contains(r.Stderr, "warning: the running daemon (pid ") || !strings.Contains(r.Stderr, "is version "+cur+", this agentbox is "+other) ||
			!strings.Contains(r.Stderr, "agentbox daemon stop") {
			t.Errorf("agentbox %v from another version: exit %d, stdout %q, stderr %q; want the mismatch and how to restart", args, r.Code, r.Stdout, r.Stderr)
		}
	}
	if r := run("version", "--json"); !strings.Contains(r.Stdout, `"mismatch": true`) || !strings.Contains(r.Stdout, `"daemon": "`+cur+`"`) {
		t.Errorf("version --json: %s", r.Stdout)
	}
}

// ageEndedLaunches moves the start and end of every ended launch recorded in the store at
// path back by d, as if they had ended d ago (no daemon may be running).
func ageEndedLaunches(t *testing.T, path string, d time.Duration) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`UPDATE launches SET started_ns = started_ns - ?, ended_ns = ended_ns - ? WHERE state IN ('exited', 'failed', 'lost')`, d.Nanoseconds(), d.Nanoseconds())
	if err != nil {
		t.Fatalf("age the ended launches in %s: %v", path, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("age the ended launches in %s: none", path)
	}
}
