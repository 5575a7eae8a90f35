//go:build linux

package e2e

import (
	"context"
	"os"
	"os/exec"
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

// deniedTools are the tools of a denied network: each reaches for a host no allowlist names and
// must fail fast, with the refusal explained. name is the hint's host:port, key its key.
var deniedTools = []struct {
	name, bin, script, target, key string
	// says is what the tool's own output shows of the proxy's refusal ("" when the tool
	// shows only the status code: curl and git print "CONNECT tunnel failed, response 403").
	says string
}{
	{"curl", "curl", `curl -sS https://denied.example.org/`, "denied.example.org:443", "egressAllow", ""},
	{"npm", "npm", `npm_config_registry=https://registry.example.org/ npm view left-pad version`, "registry.example.org:443", "egressAllow", "agentbox refused egress"},
	{"pip", "/usr/bin/python3", `/usr/bin/python3 -m pip download --no-deps -d /tmp/dl --index-url https://pypi.example.org/simple tiny-pkg`, "pypi.example.org:443", "egressAllow", "agentbox refused egress"},
	{"go", "go", `cd /tmp && GOPROXY=https://goproxy.example.org GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download example.org/mod@v1.0.0`, "goproxy.example.org:443", "egressAllow", "agentbox refused egress"},
	{"git", "git", `git ls-remote https://git.example.org/owner/repo`, "git.example.org:443", "git.allow", ""},
}

// TestDeniedNetworkExplains: with egress deny and no egressAllow at all, curl, npm, pip, go
// and git in the box fail at once (the proxy answers 403; the time each took is logged, and
// measured by BenchmarkDeniedNetwork) and agentbox ends the launch with one line naming each
// refused host and the key that would allow it. Before, npm hung until killed and the others
// failed with a bare resolver error.
func TestDeniedNetworkExplains(t *testing.T) {
	e := NewEnv(t)
	for _, tool := range deniedTools {
		t.Run(tool.name, func(t *testing.T) {
			if _, err := exec.LookPath(tool.bin); err != nil {
				t.Skipf("%s is not installed: %v", tool.bin, err)
			}
			r := e.runIn(e.Work, "run", "sh", "--", "-c", timed(tool.script))
			t.Logf("%s failed after %s in the box", tool.name, tookMS(r.Stderr))
			if r.Code == 0 || r.Code == 125 {
				t.Fatalf("want %s to fail in the box, exit %d\nstdout:\n%s\nstderr:\n%s", tool.name, r.Code, r.Stdout, r.Stderr)
			}
			out := r.Stdout + r.Stderr
			if hint := hintLine(r.Stderr); !strings.Contains(hint, tool.target+" ("+tool.key+")") {
				t.Errorf("the hint at the end of the launch (%q) does not name %s and %s:\n%s", hint, tool.target, tool.key, out)
			}
			if tool.says != "" && !strings.Contains(out, tool.says) {
				t.Errorf("%s's own message does not carry the refusal %q:\n%s", tool.name, tool.says, out)
			}
			if strings.Contains(out, "Could not resolve host") || strings.Contains(out, "Temporary failure in name resolution") || strings.Contains(out, "EAI_AGAIN") {
				t.Errorf("a bare resolver error instead of the proxy's refusal:\n%s", out)
			}
		})
	}
}

// timed wraps a box script so that it prints, on stderr, how long it ran in the box: "took N ms".
func timed(script string) string {
	return `s=$(date +%s%N); ( ` + script + ` ); rc=$?; echo "took $(( ($(date +%s%N) - s) / 1000000 )) ms" >&2; exit $rc`
}

// tookMS returns the "N ms" a timed script printed, or "?".
func tookMS(stderr string) string {
	_, after, ok := strings.Cut(stderr, "took ")
	if !ok {
		return "?"
	}
	ms, _, _ := strings.Cut(after, "\n")
	return ms
}

// hintLine returns agentbox's line about refused egress in stderr, or "".
func hintLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "agentbox: ") && strings.Contains(l, "its egress proxy refused ") {
			return l
		}
	}
	return ""
}
