//go:build linux

// Package e2e drives the real agentbox binary end to end: a real daemon, real boxes on the real
// kernel, real terminals. Set AGENTBOX_BIN to the binary under test; without it the tests build
// one.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/boxhelper"
	"github.com/agentbox/agentbox/internal/readiness"
	"github.com/agentbox/agentbox/internal/testenv"
)

var agentboxBin string

// probeBin is the binary that runs the attack probes in boxes (`attack-probe`): the daemon
// binary installed with agentboxBin (the CLI does not link the attack battery).
func probeBin(t *testing.T) string {
	t.Helper()
	cands, err := boxhelper.CandidatesFor(agentboxBin, boxhelper.DaemonName)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			return c
		}
	}
	t.Fatalf("no %s installed with %s (looked in %v)", boxhelper.DaemonName, agentboxBin, cands)
	return ""
}

func TestMain(m *testing.M) {
	if sock := os.Getenv(helperEnv); sock != "" {
		os.Exit(connectHelper(sock))
	}
	agentboxBin = os.Getenv("AGENTBOX_BIN")
	if agentboxBin == "" {
		dir, err := os.MkdirTemp("", "agentbox-e2e-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		agentboxBin = filepath.Join(dir, "agentbox")
		// Both binaries, as installed: the daemon starts shims from the box helper beside it.
		build := exec.Command("go", "build", "-o", dir+"/", "github.com/agentbox/agentbox/cmd/agentbox", "github.com/agentbox/agentbox/cmd/agentbox-daemon", "github.com/agentbox/agentbox/cmd/agentbox-box")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build agentbox:", err)
			os.Exit(1)
		}
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// parallelTests: the long tests (the real agent CLIs, the builds from host caches, the git
// relay) call t.Parallel(). Each has its own Env (daemon, runtime, state, home, tmux socket)
// and its own upstreams on ports of its own, and most of their time is spent waiting for a
// screen or a response, so they overlap well even on two CPUs (scripts/test.sh runs the suite
// with -parallel 3). A parallel test must not use t.Setenv, scan the host's processes, or
// bind a fixed port.

// Env is an isolated agentbox user environment: its own runtime, state, config and home
// directories, so each test has its own daemon.
type Env struct {
	t       *testing.T
	Root    string // short temp root (unix socket paths are limited to 108 bytes)
	Runtime string // XDG_RUNTIME_DIR
	State   string // XDG_STATE_HOME
	Config  string // XDG_CONFIG_HOME
	Home    string // HOME
	Work    string // a workspace
	Vars    []string
}

// NewEnv makes an isolated environment and stops its daemon and boxes when the test ends. Its
// folders lie in the temporary folder ($TMPDIR, else /tmp): scripts/test.sh gives the ordinary
// user's pass a tmpfs there, the root pass the disk's file system.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	root, err := os.MkdirTemp("", "abe")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o755)
	e := &Env{t: t, Root: root}
	e.Runtime = testenv.RuntimeDir(t, "abe")
	for _, d := range []*string{&e.State, &e.Config, &e.Home, &e.Work} {
		*d, err = os.MkdirTemp(root, "d")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(*d, 0o700)
	}
	e.Vars = []string{
		"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=xterm-256color",
		"HOME=" + e.Home, "XDG_RUNTIME_DIR=" + e.Runtime, "XDG_STATE_HOME=" + e.State, "XDG_CONFIG_HOME=" + e.Config,
	}
	t.Cleanup(e.Close)
	testenv.ShareReadiness(t, filepath.Join(e.State, "agentbox", readiness.CacheFile))
	return e
}

// Close stops every box of the environment, then its daemon, and removes its directories.
func (e *Env) Close() {
	if e.t.Failed() {
		e.logDaemonTail(60, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, l := range e.Launches() {
		if l.State == "running" || l.State == "starting" {
			e.Command(ctx, "stop", l.ID).Run()
		}
	}
	e.Command(ctx, "daemon", "stop").Run()
	if pid, err := os.ReadFile(filepath.Join(e.Runtime, "agentbox", "daemon.pid")); err == nil {
		var p int
		fmt.Sscan(string(pid), &p)
		testenv.KillStaleDaemon(p, e.Runtime)
	}
	os.RemoveAll(e.Root)
}

// logDaemonTail logs the last n lines of the environment's daemon log that keep accepts (all
// when keep is nil): a failed test's context in CI, where the environment is removed afterwards.
func (e *Env) logDaemonTail(n int, keep func(line string) bool) {
	logs, _ := filepath.Glob(filepath.Join(e.State, "*", "daemon.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		var lines []string
		for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			if keep == nil || keep(line) {
				lines = append(lines, line)
			}
		}
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		e.t.Logf("%s (last %d lines):\n%s", l, n, strings.Join(lines, "\n"))
	}
}

// Launches returns `agentbox launches --all --json` (nil when no daemon answers).
func (e *Env) Launches() []api.Launch {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := e.Command(ctx, "launches", "--all", "--json").Output()
	if err != nil {
		return nil
	}
	var ls []api.Launch
	if err := json.Unmarshal(out, &ls); err != nil {
		e.t.Errorf("launches --json: %v: %s", err, out)
	}
	return ls
}

// Command returns an agentbox command in this environment, run from the workspace.
func (e *Env) Command(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, agentboxBin, args...)
	c.Env = e.Vars
	c.Dir = e.Work
	return c
}

// Result is what a finished command did.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs agentbox with args and stdin, and returns its output and exit code.
func (e *Env) Run(stdin string, args ...string) Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := e.Command(ctx, args...)
	var out, errb bytes.Buffer
	c.Stdin = strings.NewReader(stdin)
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		e.t.Fatalf("agentbox %v: %v", args, err)
	}
	return r
}

// RunCmd runs a prepared agentbox command and returns its output and exit code.
func (e *Env) RunCmd(c *exec.Cmd) Result {
	e.t.Helper()
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		e.t.Fatalf("agentbox %v: %v", c.Args, err)
	}
	return r
}

// RuntimeDir is agentbox's runtime directory in this environment.
func (e *Env) RuntimeDir() string { return filepath.Join(e.Runtime, "agentbox") }

// DaemonPid returns the pid in the daemon's pid file (0 when there is none).
func (e *Env) DaemonPid() int {
	b, err := os.ReadFile(filepath.Join(e.RuntimeDir(), "daemon.pid"))
	if err != nil {
		return 0
	}
	var p int
	fmt.Sscan(string(b), &p)
	return p
}

// Launch returns the launch with id from `agentbox launches --json`.
func (e *Env) Launch(id string) (api.Launch, bool) {
	for _, l := range e.Launches() {
		if l.ID == id {
			return l, true
		}
	}
	return api.Launch{}, false
}

// ended reports whether the record of launch l says it has ended: neither starting nor running.
// A launch's record can still say "starting" while its program already runs (the daemon records
// the program's start after the shim reports it): under load a .ci/run saw a box write its
// first file with its launch still "starting", and a test that took every state but "running"
// for an end failed (TestAttackDeniedFileReplacedOnHost).
func ended(l api.Launch) bool {
	return l.State != api.StateStarting && l.State != api.StateRunning
}

// WaitLaunch polls `agentbox launches` until the launch with id satisfies cond, and returns it.
func (e *Env) WaitLaunch(id, what string, cond func(api.Launch) bool) api.Launch {
	e.t.Helper()
	var last api.Launch
	eventually(e.t, "launch "+id+" "+what, func() bool {
		l, ok := e.Launch(id)
		last = l
		return ok && cond(l)
	})
	return last
}

// Detach starts `agentbox run -d args…` and returns the launch id.
func (e *Env) Detach(args ...string) string {
	e.t.Helper()
	r := e.Run("", append([]string{"run", "-d"}, args...)...)
	id := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || len(id) != 32 {
		e.t.Fatalf("agentbox run -d %v: exit %d, stdout %q, stderr %q", args, r.Code, r.Stdout, r.Stderr)
	}
	return id
}

// deadline bounds every "eventually" condition. It is generous: the tests assert the order of
// events, never how long they take.
const deadline = 90 * time.Second

// eventually polls cond until it holds, and fails the test when the deadline passes first.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting for: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Box runs `sh -c script` in a box and returns the result.
func (e *Env) Box(script string) Result {
	e.t.Helper()
	return e.Run("", "run", "sh", "--", "-c", script)
}

// BoxLines runs script in a box, as Box does, and returns its standard output's n lines; the
// test fails when the box fails or prints another number of lines.
func (e *Env) BoxLines(script string, n int) []string {
	e.t.Helper()
	r := e.Box(script)
	if r.Code != 0 {
		e.t.Fatalf("box: %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != n {
		e.t.Fatalf("box output %q: want %d lines", r.Stdout, n)
	}
	return lines
}

func itoa(n int) string { return strconv.Itoa(n) }

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
