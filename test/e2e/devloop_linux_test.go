//go:build linux

package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
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
		t.Errorf("--workspace %s: want git to find no repository and no notice; exit %d, stdout:\n%s\nstderr:\n%s", sub, r.Code, r.Stdout, r.Stderr)
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
	// asks is how many requests the proxy refuses before the tool gives up, at least and at
	// most: one and no retry for curl, go and npm (which asked, at most once a day, for its own
	// latest version too, before its update notifier was turned off in boxes); pip asks twice (PIP_RETRIES=1: pip retries a refused
	// tunnel like a lost connection, six times over 12 s by default); git asks first without
	// the pairing (407) and again with it.
	asks [2]int64
}{
	{"curl", "curl", `curl -sS https://denied.example.org/`, "denied.example.org:443", "egressAllow", "", [2]int64{1, 1}},
	{"npm", "npm", `npm_config_registry=https://registry.example.org/ npm view left-pad version`, "registry.example.org:443", "egressAllow", "agentbox refused egress", [2]int64{1, 1}},
	{"pip", "/usr/bin/python3", `/usr/bin/python3 -m pip download --no-deps -d /tmp/dl --index-url https://pypi.example.org/simple tiny-pkg`, "pypi.example.org:443", "egressAllow", "agentbox refused egress", [2]int64{2, 2}},
	{"go", "go", `cd /tmp && GOPROXY=https://goproxy.example.org GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download example.org/mod@v1.0.0`, "goproxy.example.org:443", "egressAllow", "agentbox refused egress", [2]int64{1, 1}},
	{"git", "git", `git ls-remote https://git.example.org/owner/repo`, "git.example.org:443", "git.allow", "", [2]int64{2, 2}},
}

// TestDeniedNetworkExplains: with egress deny and no egressAllow at all, curl, npm, pip, go
// and git in the box fail at once (the proxy answers 403; the time each took is logged, and
// measured by BenchmarkDeniedNetwork) and agentbox ends the launch with one line naming each
// refused host and the key that would allow it. Before, npm hung until killed and the others
// failed with a bare resolver error.
func TestDeniedNetworkExplains(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	e := NewEnv(t)
	for _, tool := range deniedTools {
		t.Run(tool.name, func(t *testing.T) {
			if _, err := exec.LookPath(tool.bin); err != nil {
				t.Skipf("%s is not installed: %v", tool.bin, err)
			}
			seen := map[string]bool{}
			for _, l := range e.Launches() {
				seen[l.ID] = true
			}
			r := e.runIn(e.Work, "run", "sh", "--", "-c", timed(tool.script))
			t.Logf("%s failed after %s in the box", tool.name, tookMS(r.Stderr))
			// The proxy's count of the requests it refused: the tool gave up at the first
			// refusal (or its documented retries), not after a round of retries and pauses.
			for _, l := range e.Launches() {
				if seen[l.ID] {
					continue
				}
				if n := int64(0); l.Egress == nil || l.Egress.Refused < tool.asks[0] || l.Egress.Refused > tool.asks[1] {
					if l.Egress != nil {
						n = l.Egress.Refused
					}
					t.Errorf("the proxy refused %d requests of %s, want %d to %d: %+v", n, tool.name, tool.asks[0], tool.asks[1], l.Egress)
				}
			}
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

// TestNpmNoUpdateCheck: npm in a box does not ask its registry for a newer npm (its daily
// update notifier is off: npm_config_update_notifier=false, docs/toolchains.md). An `npm ci`
// that needs no network, in a box whose egress proxy refuses the registry, succeeds with no
// request refused and no refused-host line at the end of the launch. Before, the first npm of
// the day in a workspace asked for npm's latest version, and the launch ended with
// "…its egress proxy refused registry.example.org:443 (egressAllow)…".
func TestNpmNoUpdateCheck(t *testing.T) {
	t.Parallel() // its own daemon (parallelTests)
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skipf("npm is not installed: %v", err)
	}
	e := NewEnv(t)
	app := filepath.Join(e.Work, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"package.json":      `{"name":"app","version":"1.0.0"}` + "\n",
		"package-lock.json": `{"name":"app","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"app","version":"1.0.0"}}}` + "\n",
		// The project's registry: the host the update notifier would ask.
		".npmrc": "registry=https://registry.example.org/\n",
	} {
		if err := os.WriteFile(filepath.Join(app, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, l := range e.Launches() {
		seen[l.ID] = true
	}
	r := e.runIn(app, "run", "sh", "--", "-c", `npm ci --no-fund && echo CONFIG "$(npm config get update-notifier)"`)
	if r.Code != 0 {
		t.Fatalf("npm ci in the box: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if got := field(r.Stdout, "CONFIG"); got != "false" {
		t.Errorf("npm's update-notifier in the box is %q, want false", got)
	}
	if hint := hintLine(r.Stderr); hint != "" {
		t.Errorf("the launch ended with a refused-host line for a request the user never made: %s", hint)
	}
	for _, l := range e.Launches() {
		if !seen[l.ID] && l.Egress != nil && l.Egress.Refused != 0 {
			t.Errorf("the egress proxy refused %d requests of npm ci: %+v", l.Egress.Refused, l.Egress)
		}
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

// goModule is a Go module the tests make themselves: example.org/dep v1.0.0 in a file:// module
// proxy under dir, whose Msg is msg.
func goModule(t *testing.T, dir, msg string) string {
	t.Helper()
	proxy := filepath.Join(dir, "proxy")
	v := filepath.Join(proxy, "example.org", "dep", "@v")
	if err := os.MkdirAll(v, 0o755); err != nil {
		t.Fatal(err)
	}
	mod := "module example.org/dep\n\ngo 1.22\n"
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for name, body := range map[string]string{"go.mod": mod, "dep.go": "package dep\n\nconst Msg = " + strconv.Quote(msg) + "\n"} {
		w, err := zw.Create("example.org/dep@v1.0.0/" + name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"list": []byte("v1.0.0\n"), "v1.0.0.info": []byte(`{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}`),
		"v1.0.0.mod": []byte(mod), "v1.0.0.zip": zb.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(v, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proxy
}

// goApp writes a module in dir that prints example.org/dep's Msg on stderr.
func goApp(t *testing.T, dir string) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.org/app\n\ngo 1.22\n\nrequire example.org/dep v1.0.0\n"), 0o644)
	// println, not fmt: the first boxed build compiles the runtime only, not half the library.
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"example.org/dep\"\n\nfunc main() { println(dep.Msg) }\n"), 0o644)
}

// hostGo runs the go command on the host as the environment's user would, unboxed: the home's
// default module cache, a build cache of the test's.
func hostGo(t *testing.T, e *Env, dir string, extra []string, args ...string) string {
	t.Helper()
	c := exec.Command("go", args...)
	c.Dir = dir
	c.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.Home, "GOCACHE=" + hostGoCache(t),
		"GOTOOLCHAIN=local", "GOFLAGS=-modcacherw", "GOSUMDB=off"}, extra...)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("host go %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// hostGoCache is the build cache of the user running the test (warm: the host's builds are not
// what the test measures).
func hostGoCache(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		return filepath.Join(t.TempDir(), "gocache")
	}
	return strings.TrimSpace(string(out))
}

// treeHash hashes every path, mode, size, modification time and content beneath dir.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d %d\n", p, info.Mode(), info.Size(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestGoBuildFromHostCache: a Go module whose dependency is only in the host's module cache
// builds in a box with no network (the box's GOMODCACHE is the host's, an overlay under the
// box cache's layer); the first launch's build takes what the host's build cache holds
// (~/.cache/go-build is the lower layer of the box's): it compiles only the package the host
// never built — not the runtime, not the module's package, not the main package — and the
// second launch finds what the first compiled (the box cache's layers keep it); the host's
// module and build caches are unchanged (paths, modes, sizes, times, contents) although the
// box appended to, touched and added to its build cache, and rewrote a module's source; and
// that rewritten module is never what an unboxed go compiles. Before, the box had no module
// cache at all and go failed on the network; each workspace's first boxed build compiled
// everything, the runtime included, in an empty build cache; and then, with the box's module
// cache in the box cache, it compiled the module and the main package again.
func TestGoBuildFromHostCache(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not installed")
	}
	e := NewEnv(t)
	proxy := goModule(t, e.Root, "from the host cache")
	app := filepath.Join(e.Work, "app")
	goApp(t, app)
	// A package the host never builds: the first box compiles it, the second finds it.
	os.MkdirAll(filepath.Join(app, "extra"), 0o755)
	os.WriteFile(filepath.Join(app, "extra", "extra.go"), []byte("package extra\n\nconst X = 1\n"), 0o644)
	// A repository, as projects are: in a folder without one the box sees the workspace's
	// placeholder .git, and go's VCS stamping fails on it.
	gitTools(t)
	gitRun(t, app, gitHostEnv(e.Home), nil, "init", "-q")
	// The host's own unboxed build fills the host's module cache (~/go/pkg/mod), go.sum and
	// the home's default build cache (~/.cache/go-build).
	hostCache := filepath.Join(e.Home, ".cache", "go-build")
	// The user's go settings (`go env -w`, the go env file in the configuration folder): the
	// box's go builds with them too. GOAMD64 is in every compilation's cache key; before the
	// daemon carried the file's settings, the box compiled every package again (go build -v
	// below).
	goenv := filepath.Join(e.Config, "go", "env")
	if runtime.GOARCH == "amd64" {
		if err := os.MkdirAll(filepath.Dir(goenv), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goenv, []byte("GOAMD64=v2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hostGo(t, e, app, []string{"GOPROXY=file://" + proxy, "GOENV=" + goenv}, "mod", "tidy")
	hostGo(t, e, app, []string{"GOPROXY=off", "GOCACHE=" + hostCache, "GOENV=" + goenv}, "build", "-o", filepath.Join(e.Root, "hostapp"), ".")
	if err := os.RemoveAll(proxy); err != nil { // from now on the module is in the host's cache only
		t.Fatal(err)
	}
	modcache := filepath.Join(e.Home, "go", "pkg", "mod")
	before, beforeCache := treeHash(t, modcache), treeHash(t, hostCache)

	r := e.runIn(app, "run", "sh", "--", "-c", `set -e; go build -v -o /tmp/app . && /tmp/app; go build -v ./extra
c=$(go env GOCACHE); f=$(find "$c" -type f -name '*-d' | head -1)
echo box >> "$f"; find "$c" -exec touch {} +; echo planted > "$c/planted"; rm -f "$c/trim.txt"`)
	if r.Code != 0 || !strings.Contains(r.Stderr, "from the host cache") {
		t.Fatalf("first boxed build: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "example.org/app/extra") {
		t.Fatalf("the first box did not compile example.org/app/extra (go build -v):\n%s", r.Stderr)
	}
	// go build -v names each package it compiles: the first box compiles example.org/app/extra,
	// which the host never built, and nothing else. The standard library, example.org/dep and
	// the main package are in the host's build cache: the box's module cache is at the host's
	// path (an overlay), and a compilation's cache key holds its package's folder. Before, the
	// box extracted example.org/dep into the box cache's module cache, another folder, and
	// compiled it and the main package again (docs/toolchains.md).
	var compiled []string
	for _, l := range strings.Split(r.Stderr, "\n") {
		if l != "" && !strings.ContainsAny(l, " :#'") && l != "example.org/app/extra" {
			compiled = append(compiled, l)
		}
	}
	if len(compiled) > 0 {
		t.Errorf("the first box compiled %d packages the host's build cache holds (%v):\n%s", len(compiled), compiled, r.Stderr)
	}
	r = e.runIn(app, "run", "sh", "--", "-c", `go build -v -o /tmp/app . && /tmp/app && go build -v ./extra`)
	if r.Code != 0 || !strings.Contains(r.Stderr, "from the host cache") {
		t.Fatalf("second boxed build: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stderr, "example.org/app/extra") {
		t.Errorf("the second launch compiled example.org/app/extra again: the box cache's layer did not keep it:\n%s", r.Stderr)
	}
	if after := treeHash(t, modcache); after != before {
		t.Errorf("the host's module cache %s changed while boxes built", modcache)
	}
	if after := treeHash(t, hostCache); after != beforeCache {
		t.Errorf("the host's build cache %s changed while boxes built", hostCache)
	}

	// Poison the box cache: a box rewrites the module's source at the host's path, which lands
	// in the box cache's layer; the host's module cache keeps its own.
	r = e.runIn(app, "run", "sh", "--", "-c", `set -e; d=$(go env GOMODCACHE)/example.org/dep@v1.0.0
chmod u+w "$d" "$d/dep.go"; echo 'package dep

const Msg = "POISONED by a box"' > "$d/dep.go"; go build -o /tmp/app . && /tmp/app`)
	if r.Code != 0 || !strings.Contains(r.Stderr, "POISONED by a box") {
		t.Fatalf("the box did not plant its code in its module cache: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if layer, _ := filepath.Glob(filepath.Join(e.State, "agentbox", "cache", "*", "gomod", "upper", "example.org", "dep@v1.0.0", "dep.go")); len(layer) != 1 {
		t.Errorf("the box cache's gomod layer does not hold the box's copy of the module (%v)", layer)
	}
	if after := treeHash(t, modcache); after != before {
		t.Errorf("the host's module cache %s changed when a box rewrote a module", modcache)
	}
	hostGo(t, e, app, []string{"GOPROXY=off"}, "build", "-o", filepath.Join(e.Root, "hostapp"), ".")
	out, err := exec.Command(filepath.Join(e.Root, "hostapp")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "from the host cache" {
		t.Errorf("the unboxed build printed %q (%v), want the host cache's module", out, err)
	}
}

// TestGoModulesWithoutOverlay: with the bwrap engine, which builds no overlay (as on a kernel
// before 6.13), the box's module cache at the host's path is the box cache's gomod layer
// alone, and the host's downloads, read-only at /run/agentbox-goproxy, are go's first proxy:
// in a box with no network, go extracts there a module only the host's cache holds, into the
// layer, and the host's module cache is unchanged. A project's node_modules is the box cache's
// layer alone as well: what the box writes there is not in the workspace. Checked by hand
// only until now (docs/toolchains.md, Go). No compilation: go list extracts the module to
// find its folder. (go mod download of the module would ask the host's downloads for its
// .info, which the host's go mod tidy does not write, and go on to the next proxy.)
func TestGoModulesWithoutOverlay(t *testing.T) {
	t.Parallel() // its own daemon; mostly waits (parallelTests)
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not installed")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skipf("bwrap is not installed: %v", err)
	}
	e := NewEnv(t)
	writeConfig(t, e, "engine: bwrap\n")
	proxy := goModule(t, e.Root, "from the host cache")
	app := filepath.Join(e.Work, "app")
	goApp(t, app)
	if err := os.WriteFile(filepath.Join(app, "package.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostGo(t, e, app, []string{"GOPROXY=file://" + proxy}, "mod", "tidy")
	if err := os.RemoveAll(proxy); err != nil { // from now on the module is in the host's cache only
		t.Fatal(err)
	}
	modcache := filepath.Join(e.Home, "go", "pkg", "mod")
	before := treeHash(t, modcache)

	r := e.runIn(app, "run", "sh", "--", "-c", `set -e; go env GOPROXY; cat "$(go list -f '{{.Dir}}' example.org/dep)/dep.go"
mkdir -p node_modules/.bin && echo planted > node_modules/.bin/node && echo node_modules-written`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "file:///run/agentbox-goproxy,") || !strings.Contains(r.Stdout, `"from the host cache"`) ||
		!strings.Contains(r.Stdout, "node_modules-written") {
		t.Fatalf("go list extracting from the host's downloads, bwrap engine: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if got, _ := filepath.Glob(filepath.Join(e.State, "agentbox", "cache", "*", "gomod", "upper", "example.org", "dep@v1.0.0", "dep.go")); len(got) != 1 {
		t.Errorf("the box cache's gomod layer does not hold the module the box extracted (%v)", got)
	}
	if treeHash(t, modcache) != before {
		t.Errorf("the host's module cache %s changed", modcache)
	}
	if _, err := os.Lstat(filepath.Join(app, "node_modules")); !os.IsNotExist(err) {
		t.Errorf("what the box wrote in node_modules is in the workspace (%v)", err)
	}
	if got, _ := filepath.Glob(filepath.Join(e.State, "agentbox", "cache", "*", "dep-*-node_modules", "upper", ".bin", "node")); len(got) != 1 {
		t.Errorf("the box cache's node_modules layer does not hold what the box wrote (%v)", got)
	}
}

// boxGoModCache is the GOMODCACHE a box of workspace ws gets, as go in a box reports it.
func boxGoModCache(t *testing.T, e *Env, ws string) string {
	t.Helper()
	r := e.runIn(ws, "run", "sh", "--", "-c", "go env GOMODCACHE")
	mc := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || !filepath.IsAbs(mc) {
		t.Fatalf("go env GOMODCACHE in a box: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	return mc
}

// TestAttackBoxCacheAcrossWorkspaces: a box of workspace A changes a module's source in its
// module cache, which lands in its box cache's layer (go trusts an extracted module folder and
// does not check it against go.sum again); a box of workspace B building the same module, at
// the same path (the host's module cache's), does not run A's code. The poison does run in
// A's next box (the box cache of
// one workspace stays warm, and is that workspace's to spoil). The daemon that the first launch
// started runs in "/", not in workspace A. Before, every box of the user shared one box cache,
// and B's build printed A's line; and the daemon ran in the workspace it was started from.
func TestAttackBoxCacheAcrossWorkspaces(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not installed")
	}
	gitTools(t)
	e := NewEnv(t)
	proxy := goModule(t, e.Root, "from the host cache")
	a, b := filepath.Join(e.Work, "a"), filepath.Join(e.Work, "b")
	for _, ws := range []string{a, b} {
		goApp(t, ws)
		gitRun(t, ws, gitHostEnv(e.Home), nil, "init", "-q")
		hostGo(t, e, ws, []string{"GOPROXY=file://" + proxy}, "mod", "tidy")
	}
	if err := os.RemoveAll(proxy); err != nil { // the module is in the host's cache only
		t.Fatal(err)
	}

	const poison = "POISONED by the box of workspace A"
	r := e.runIn(a, "run", "sh", "--", "-c", `set -e
go build -o /tmp/app . && /tmp/app
d=$(go env GOMODCACHE)/example.org/dep@v1.0.0
chmod u+w "$d" "$d/dep.go"
printf '\nfunc init() { println("`+poison+`") }\n' >> "$d/dep.go"
go build -o /tmp/app . && /tmp/app`)
	if r.Code != 0 || !strings.Contains(r.Stderr, poison) {
		t.Fatalf("box A did not plant its code in its module cache: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	// The daemon, started by that first `agentbox run` from workspace A, does not run in it
	// (it asks the host's go for GOPROXY; a box-written go.mod there could switch go's toolchain).
	if pid := e.DaemonPid(); pid == 0 {
		t.Error("no daemon pid file after a launch")
	} else if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || cwd != "/" {
		t.Errorf("the daemon's cwd is %q (%v), want /", cwd, err)
	}

	r = e.runIn(b, "run", "sh", "--", "-c", `go build -o /tmp/app . && /tmp/app`)
	if r.Code != 0 || !strings.Contains(r.Stderr, "from the host cache") {
		t.Fatalf("box B's build: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stderr, poison) {
		t.Errorf("box B ran the code box A planted in the box cache:\n%s", r.Stderr)
	}
	// Both see the module cache at the host's path, each through its own box cache's layer.
	if mc := filepath.Join(e.Home, "go", "pkg", "mod"); boxGoModCache(t, e, a) != mc || boxGoModCache(t, e, b) != mc {
		t.Errorf("the boxes' GOMODCACHE is not the host's %s", mc)
	}
	r = e.runIn(a, "run", "sh", "--", "-c", `go build -o /tmp/app . && /tmp/app`)
	if r.Code != 0 || !strings.Contains(r.Stderr, poison) {
		t.Errorf("box A's next build did not see its own box cache (a cold cache per box?): exit %d\nstderr:\n%s", r.Code, r.Stderr)
	}
}

// TestAttackToolchainsReadOnly: the box sees the toolchains on PATH under the home at their
// own paths, and the host's module downloads as its first GOPROXY entry, and can change none
// of them (create, append, remove, rename, chmod); a harness home on PATH stays out, and a
// toolchain root's credentials are masked; the host's ~/go is unchanged. Before, none of these
// paths existed in the box (the home was empty).
func TestAttackToolchainsReadOnly(t *testing.T) {
	e := NewEnv(t)
	mk := func(p, body string, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	tool := filepath.Join(e.Home, ".toolx", "bin", "hello-tool")
	mk(tool, "#!/bin/sh\necho hello from the toolchain\n", 0o755)
	lib := filepath.Join(e.Home, ".toolx", "lib", "core.txt")
	mk(lib, "toolchain-core-lib\n", 0o644)
	cargoBin := filepath.Join(e.Home, ".cargo", "bin", "cargo-x")
	mk(cargoBin, "#!/bin/sh\n", 0o755)
	cred := filepath.Join(e.Home, ".cargo", "credentials.toml")
	mk(cred, "[registry]\ntoken = \"SECRET-CARGO-TOKEN\"\n", 0o600)
	harness := filepath.Join(e.Home, ".claude", "local", "bin", "claude-helper")
	mk(harness, "#!/bin/sh\n", 0o755)
	mod := filepath.Join(e.Home, "go", "pkg", "mod", "cache", "download", "example.org", "dep", "@v", "v1.0.0.mod")
	mk(mod, "module example.org/dep\n", 0o644)
	for i, v := range e.Vars {
		if strings.HasPrefix(v, "PATH=") {
			e.Vars[i] = "PATH=" + strings.Join([]string{filepath.Dir(tool), filepath.Dir(cargoBin), filepath.Dir(harness)}, ":") + ":" + os.Getenv("PATH")
		}
	}
	before := map[string]string{}
	for _, d := range []string{filepath.Join(e.Home, ".toolx"), filepath.Join(e.Home, "go"), filepath.Join(e.Home, ".cargo")} {
		before[d] = treeHash(t, d)
	}

	// The host's module downloads as GOPROXY's first entry (the module cache itself, at its
	// own path, is an overlay the box writes: TestAttackPackageCaches).
	view := "/run/agentbox-goproxy/example.org/dep/@v/v1.0.0.mod"
	r := e.Box(`hello-tool; cat ` + lib + ` ` + mod + ` ` + view + `; cat ` + cred + ` 2>/dev/null; ls ` + filepath.Dir(harness) + ` 2>&1 | head -1
for p in ` + tool + ` ` + lib + ` ` + view + ` ` + cargoBin + `; do
  d=$(dirname "$p")
  touch "$d/planted" 2>/dev/null && echo "WROTE create $d"
  echo x >> "$p" 2>/dev/null && echo "WROTE append $p"
  mv "$p" "$p.moved" 2>/dev/null && echo "WROTE rename $p"
  rm -f "$p" 2>/dev/null; [ -e "$p" ] || echo "WROTE remove $p"
  chmod 777 "$p" 2>/dev/null && echo "WROTE chmod $p"
  ln -s /tmp "$d/link" 2>/dev/null && echo "WROTE symlink $d"
done
mv ` + filepath.Join(e.Home, ".toolx") + ` ` + filepath.Join(e.Home, ".toolx2") + ` 2>/dev/null && echo "WROTE rename root"
echo done`)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Count(r.Stdout, "module example.org/dep") != 2 {
		t.Errorf("the box does not see the host's module cache at its own path and as GOPROXY's first entry:\n%s", r.Stdout)
	}
	for _, want := range []string{"hello from the toolchain", "toolchain-core-lib", "done"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the box does not see %q (toolchain or host cache not visible):\n%s", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "WROTE") {
		t.Errorf("the box changed a toolchain or the host's cache:\n%s", r.Stdout)
	}
	if strings.Contains(r.Stdout, "SECRET-CARGO-TOKEN") {
		t.Errorf("the box read ~/.cargo/credentials.toml")
	}
	if !strings.Contains(r.Stdout, "No such file or directory") {
		t.Errorf("a harness home on PATH (%s) is visible in the box:\n%s", filepath.Dir(harness), r.Stdout)
	}
	for d, h := range before {
		if treeHash(t, d) != h {
			t.Errorf("%s changed on the host", d)
		}
	}
}
