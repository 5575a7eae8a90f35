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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

var agentboxBin string

func TestMain(m *testing.M) {
	agentboxBin = os.Getenv("AGENTBOX_BIN")
	if agentboxBin == "" {
		dir, err := os.MkdirTemp("", "agentbox-e2e-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		agentboxBin = filepath.Join(dir, "agentbox")
		build := exec.Command("go", "build", "-o", agentboxBin, "github.com/agentbox/agentbox/cmd/agentbox")
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

// NewEnv makes an isolated environment and stops its daemon and boxes when the test ends.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "abe")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o755)
	e := &Env{t: t, Root: root}
	for _, d := range []*string{&e.Runtime, &e.State, &e.Config, &e.Home, &e.Work} {
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
	return e
}

// Close stops every box of the environment, then its daemon, and removes its directories.
func (e *Env) Close() {
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
		if p > 0 {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	os.RemoveAll(e.Root)
}

// Launches returns `agentbox launches --json` (nil when no daemon answers).
func (e *Env) Launches() []api.Launch {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := e.Command(ctx, "launches", "--json").Output()
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

// Box runs `sh -c script` in a box and returns the result.
func (e *Env) Box(script string) Result {
	e.t.Helper()
	return e.Run("", "run", "sh", "--", "-c", script)
}
