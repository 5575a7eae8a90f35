//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runIn runs agentbox with args from dir (instead of the environment's workspace).
func (e *Env) runIn(dir string, args ...string) Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := e.Command(ctx, args...)
	c.Dir = dir
	return e.RunCmd(c)
}

// TestRepoWorkspace: run from a subdirectory of a git repository, the repository's top level is
// the workspace (git in the box finds it) and the program starts in the subdirectory; agentbox
// says so once; --workspace keeps the directory named. Before, git in the box answered "not a
// git repository (or any parent up to mount point …)".
func TestRepoWorkspace(t *testing.T) {
	gitTools(t)
	e := NewEnv(t)
	repo := filepath.Join(e.Work, "proj")
	sub := filepath.Join(repo, "pkg", "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	gitRun(t, repo, gitHostEnv(e.Home), nil, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(repo, "top.txt"), []byte("top\n"), 0o644)
	gitRun(t, repo, gitHostEnv(e.Home), nil, "add", "top.txt")
	gitRun(t, repo, gitHostEnv(e.Home), nil, "-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "-qm", "init")

	script := `pwd; git rev-parse --show-toplevel && git status --short --untracked-files=no && echo GIT_OK; cat ../../top.txt`
	r := e.runIn(sub, "run", "sh", "--", "-c", script)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) < 4 || lines[0] != sub || lines[1] != repo || lines[2] != "GIT_OK" || lines[3] != "top" {
		t.Fatalf("in the box: want pwd %s, top level %s, git ok and the repo's top.txt; got:\n%s\nstderr:\n%s", sub, repo, r.Stdout, r.Stderr)
	}
	if n := strings.Count(r.Stderr, "agentbox: the workspace is the git repository "+repo); n != 1 {
		t.Errorf("want the notice naming %s once on stderr, got %d times:\n%s", repo, n, r.Stderr)
	}

	// --workspace overrides: the subdirectory only, git finds no repository, and no notice.
	r = e.runIn(sub, "run", "--workspace", sub, "sh", "--", "-c", `git rev-parse --show-toplevel 2>&1; pwd`)
	if !strings.Contains(r.Stdout, "not a git repository") || strings.Contains(r.Stderr, "workspace is the git repository") {
		t.Errorf("--workspace %s: want git to find no repository and no notice; stdout:\n%s\nstderr:\n%s", sub, r.Stdout, r.Stderr)
	}
}

// TestRepoWorkspaceRefusedTop: when the repository around the directory is one agentbox
// refuses as a workspace (the home itself: a dotfiles repository), the directory stays the
// workspace and agentbox says why git will not see the repository.
func TestRepoWorkspaceRefusedTop(t *testing.T) {
	gitTools(t)
	e := NewEnv(t)
	gitRun(t, e.Home, gitHostEnv(e.Home), nil, "init", "-q", "-b", "main")
	proj := filepath.Join(e.Home, "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	r := e.runIn(proj, "run", "sh", "--", "-c", `pwd; git rev-parse --show-toplevel 2>&1`)
	if r.Code == 125 {
		t.Fatalf("launch refused: %s", r.Stderr)
	}
	if !strings.HasPrefix(r.Stdout, proj+"\n") || !strings.Contains(r.Stdout, "not a git repository") {
		t.Errorf("want the box in %s without the home's repository; stdout:\n%s\nstderr:\n%s", proj, r.Stdout, r.Stderr)
	}
	want := "agentbox: the workspace is " + proj + ", not the git repository around it: " + e.Home + " is your home directory"
	if !strings.Contains(r.Stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.Stderr)
	}
}
