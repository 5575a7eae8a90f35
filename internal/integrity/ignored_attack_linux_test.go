package integrity_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The attack tests of this file (review 15, F1, F5 and F7): a real box writes code in places
// the workspace's .gitignore hides, the host's git status is empty, and the host's ordinary
// tool (python3 -m pytest, go test ./..., node --test, make test) runs in the workspace. The
// check at exit must have moved what the box left there out of the workspace, into the
// launch's proposed changes. Each planted program writes a marker in a folder the box cannot
// see, so a marker can only come from the host's tool.

// leftIgnored checks what the check at exit did with the files the box left in ignored
// places: each of paths is gone from the workspace and listed by agentbox changes, and the
// end of agentbox run (out) said so.
func (e *daemonEnv) leftIgnored(out string, paths ...string) {
	e.t.Helper()
	if st, _ := hostGit(e.work, "status", "--porcelain"); st != "" {
		e.t.Errorf("the host's git status after the box shows %q; the attack relies on an empty one", st)
	}
	id := e.lastLaunch().ID
	listed := e.run("changes", id)
	for _, p := range paths {
		if _, err := os.Lstat(filepath.Join(e.work, p)); err == nil {
			e.t.Errorf("%s, which the box left in a git-ignored place, is still in the workspace", p)
		}
		if !strings.Contains(listed, p+" (left in a git-ignored place") {
			e.t.Errorf("agentbox changes does not list %s as left in a git-ignored place:\n%s", p, listed)
		}
	}
	if !strings.Contains(out, fmt.Sprintf("agentbox: the launch left %d files in git-ignored places", len(paths))) {
		e.t.Errorf("the end of agentbox run does not say that %d files left in git-ignored places were moved out:\n%s", len(paths), out)
	}
}

// hostPython returns a python3 of the host that has pytest ("" when none has).
func hostPython() string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import pytest").Run() == nil {
			return p
		}
	}
	return ""
}

// TestAttackIgnoredPythonEntryPoint (review 15, F1): the box writes abx.egg-info/entry_points.txt
// registering a pytest plugin (a pytest11 entry point) whose module it writes in build/lib/,
// and a test module in htmlcov/: all three are git-ignored in every Python project. The host's
// python3 -m pytest (python -m puts the folder first on sys.path, importlib.metadata takes the
// egg-info for an installed distribution, pytest loads its plugins and collects test_*.py in
// htmlcov/) must run none of them. Where no python3 of the host has pytest, the host loads the
// pytest11 entry points as pytest would (importlib.metadata, the folder on sys.path).
func TestAttackIgnoredPythonEntryPoint(t *testing.T) {
	t.Parallel()
	needPython(t)
	e := newDaemonEnv(t)
	write(t, filepath.Join(e.work, "tests", "test_a.py"), "def test_ok():\n    assert True\n")
	ignoringRepo(t, e.work, "build/\n*.egg-info/\n__pycache__/\n*.py[cod]\n.venv/\nhtmlcov/\n.pytest_cache/\n")
	plugin, _ := e.marker("entry-point-plugin")
	cov, _ := e.marker("htmlcov-test")
	out := e.boxPlant(fmt.Sprintf(`mkdir -p build/lib abx.egg-info htmlcov &&
echo 'import os; os.close(os.open(%q, os.O_CREAT | os.O_WRONLY))' > build/lib/abx_plugin.py &&
printf 'Metadata-Version: 2.1\nName: abx\nVersion: 1.0\n' > abx.egg-info/PKG-INFO &&
printf '[pytest11]\nabx = build.lib.abx_plugin\n' > abx.egg-info/entry_points.txt &&
echo 'import os; os.close(os.open(%q, os.O_CREAT | os.O_WRONLY))' > htmlcov/test_cov.py && echo planted`, plugin, cov))
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	e.leftIgnored(out, "abx.egg-info/PKG-INFO", "abx.egg-info/entry_points.txt", "build/lib/abx_plugin.py", "htmlcov/test_cov.py")
	if py := hostPython(); py != "" {
		c := exec.Command(py, "-m", "pytest", "-q", "-p", "no:cacheprovider")
		c.Dir = e.work
		got, err := c.CombinedOutput()
		if err != nil || !strings.Contains(string(got), "1 passed") {
			t.Errorf("the host's %s -m pytest: %v\n%s", py, err, got)
		}
		notRun(t, cov, "the host's python3 -m pytest (collecting htmlcov/test_cov.py)", out)
	} else {
		hostRun(t, e.work, "python3", "-c", `import importlib.metadata as m; [e.load() for e in m.entry_points(group="pytest11")]`)
	}
	notRun(t, plugin, "the host's python3 (pytest11 entry point in abx.egg-info)", out)
}

// hostGo returns the host's go ("" when there is none).
func hostGo() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		return "/usr/local/go/bin/go"
	}
	return ""
}

// TestAttackIgnoredGoTest (review 15, F5): a module whose .gitignore is agentbox's own (bin/,
// /dist/, *.test); the box writes bin/tools/tools_test.go, whose TestMain writes a marker. The
// host's go test ./... (which takes every folder of the module, ignored or not) must not run
// it.
func TestAttackIgnoredGoTest(t *testing.T) {
	t.Parallel()
	goBin := hostGo()
	if goBin == "" {
		t.Skip("go not installed")
	}
	e := newDaemonEnv(t)
	write(t, filepath.Join(e.work, "go.mod"), "module example.org/app\n\ngo 1.21\n")
	// repo's main.go is package main.
	write(t, filepath.Join(e.work, "app.go"), "package main\n\nfunc F() int { return 1 }\n\nfunc main() {}\n")
	write(t, filepath.Join(e.work, "app_test.go"), "package main\n\nimport \"testing\"\n\nfunc TestF(t *testing.T) {\n\tif F() != 1 {\n\t\tt.Fatal()\n\t}\n}\n")
	ignoringRepo(t, e.work, "bin/\n/dist/\n*.test\n")
	mark, _ := e.marker("go-testmain")
	out := e.boxPlant(fmt.Sprintf(`mkdir -p bin/tools && printf 'package tools\n\nimport (\n\t"os"\n\t"testing"\n)\n\nfunc TestMain(m *testing.M) {\n\tos.WriteFile(%q, nil, 0o644)\n\tos.Exit(m.Run())\n}\n' > bin/tools/tools_test.go && echo planted`, mark))
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	e.leftIgnored(out, "bin/tools/tools_test.go")
	c := exec.Command(goBin, "test", "./...")
	c.Dir = e.work
	c.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOWORK=off")
	if got, err := c.CombinedOutput(); err != nil {
		t.Errorf("the host's go test ./...: %v\n%s", err, got)
	}
	notRun(t, mark, "the host's go test ./... (bin/tools/tools_test.go)", out)
}

// TestAttackIgnoredNodeTest (review 15, F5, with npm): "test": "node --test", whose runner
// finds *.test.js in every folder but node_modules; the box writes dist/x.test.js (dist/ is
// ignored). The host's npm test must not run it.
func TestAttackIgnoredNodeTest(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed")
	}
	e := newDaemonEnv(t)
	write(t, filepath.Join(e.work, "package.json"), `{"name":"app","version":"1.0.0","scripts":{"test":"node --test"}}`+"\n")
	write(t, filepath.Join(e.work, "test", "a.test.js"), "require('node:test')('ok', () => {})\n")
	ignoringRepo(t, e.work, "dist/\ncoverage/\n")
	mark, _ := e.marker("node-test")
	out := e.boxPlant(fmt.Sprintf(`mkdir -p dist && echo 'require("fs").writeFileSync(%q, "box")' > dist/x.test.js && echo planted`, mark))
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	e.leftIgnored(out, "dist/x.test.js")
	if _, err := exec.LookPath("npm"); err == nil {
		hostRun(t, e.work, "npm", "test")
	} else {
		hostRun(t, e.work, "node", "--test")
	}
	notRun(t, mark, "the host's npm test (dist/x.test.js)", out)
}

// TestAttackIgnoredMakeBuildOutput (review 15, F7): the host built build/app (ignored) from
// main.c; the box replaces it with a script, newer than its source. The host's make test (which
// takes build/app for fresh) must run the host's program, built again. Once per engine: the
// check is the daemon's, whichever engine built the box.
func TestAttackIgnoredMakeBuildOutput(t *testing.T) {
	for _, p := range []string{"make", "cc"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skip(p + " not installed")
		}
	}
	for _, eng := range []string{"native", "bwrap"} {
		t.Run(eng, func(t *testing.T) {
			t.Parallel()
			attackIgnoredMakeBuildOutput(t, newEngineDaemonEnv(t, eng))
		})
	}
}

func attackIgnoredMakeBuildOutput(t *testing.T, e *daemonEnv) {
	write(t, filepath.Join(e.work, "main.c"), "#include <stdio.h>\nint main(void){puts(\"host app ok\");return 0;}\n")
	write(t, filepath.Join(e.work, "Makefile"), "build/app: main.c\n\tmkdir -p build && cc -o build/app main.c\ntest: build/app\n\t./build/app\n")
	ignoringRepo(t, e.work, "build/\n")
	if got := hostRun(t, e.work, "make", "-s", "test"); !strings.Contains(got, "host app ok") {
		t.Fatalf("the host's first make test: %q", got)
	}
	mark, _ := e.marker("make-build-output")
	out := e.boxPlant(fmt.Sprintf(`printf '#!/bin/sh\necho BOX BINARY RAN; touch %s\n' > build/app && chmod +x build/app && echo planted`, mark))
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	e.leftIgnored(out, "build/app")
	if got := hostRun(t, e.work, "make", "-s", "test"); !strings.Contains(got, "host app ok") || strings.Contains(got, "BOX") {
		t.Errorf("the host's make test after the box: %q, want the host's program, built again", got)
	}
	notRun(t, mark, "the host's make test (build/app)", out)
}

// TestIgnoredBuildOutputApply: what the rule costs a user, and how it is paid. The box builds
// the project's program with go build -o bin/x (bin/ is ignored) and runs it; at exit bin/x is
// moved out of the workspace, agentbox changes lists it, and agentbox apply ID bin/x gives the
// user the box's binary, executable, which the host then runs. The program imports nothing
// (println writes to stderr, which the test reads with stdout): go build in the box starts with
// an empty build cache, and compiling the runtime alone costs about half of the CPU time that
// compiling fmt and what it imports did (docs/benchmarks.md, CI time).
func TestIgnoredBuildOutputApply(t *testing.T) {
	t.Parallel()
	if hostGo() == "" {
		t.Skip("go not installed")
	}
	e := newDaemonEnv(t)
	write(t, filepath.Join(e.work, "go.mod"), "module example.org/app\n\ngo 1.21\n")
	write(t, filepath.Join(e.work, "cmd", "x", "main.go"), "package main\n\nfunc main() { println(\"built in the box\") }\n")
	ignoringRepo(t, e.work, "bin/\n")
	out := e.boxPlant(`export PATH=$PATH:/usr/local/go/bin GOFLAGS=-mod=mod GOTOOLCHAIN=local; go build -o bin/x ./cmd/x && ./bin/x`)
	if !strings.Contains(out, "built in the box") {
		t.Fatalf("the box's go build and run failed (the test would prove nothing):\n%s", out)
	}
	e.leftIgnored(out, "bin/x")
	id := e.lastLaunch().ID
	if got := e.run("apply", id, "bin/x"); !strings.Contains(got, "applied bin/x") {
		t.Errorf("agentbox apply %s bin/x: %q", id, got)
	}
	fi, err := os.Stat(filepath.Join(e.work, "bin", "x"))
	if err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("bin/x after apply: %v %v", fi, err)
	}
	if got := hostRun(t, e.work, filepath.Join(e.work, "bin", "x")); got != "built in the box\n" {
		t.Errorf("the applied bin/x printed %q", got)
	}
	if got := e.run("changes", id); !strings.Contains(got, "proposed no changes") {
		t.Errorf("agentbox changes after the apply: %q, want none left", got)
	}
}

// BenchmarkIgnoredExitRealBox: a real box writes 2 GiB of build output in an ignored build/
// (8 files of 256 MiB, written by head from /dev/zero); the check at exit keeps 1 GiB of it
// in the launch's proposed changes (a rename: the state folder is on the workspace's file
// system here) and removes the rest. Metrics: the check's own time (the daemon's log), and
// agentbox run's whole time, the box's writing included; files kept and removed.
func BenchmarkIgnoredExitRealBox(b *testing.B) {
	for i := 0; i < b.N; i++ {
		e := newDaemonEnv(b)
		ignoringRepo(b, e.work, "build/\n")
		b.ResetTimer()
		start := time.Now()
		out := e.boxPlant(`mkdir -p build && for i in 1 2 3 4 5 6 7 8; do head -c 268435456 /dev/zero > build/big$i || exit 1; done; echo wrote`)
		whole := time.Since(start)
		b.StopTimer()
		if !strings.Contains(out, "wrote") {
			b.Fatalf("the box did not write its 2 GiB:\n%s", out)
		}
		m := regexp.MustCompile(`moved the files the launch left in git-ignored places[^\n]* kept=(\d+) bytes=\d+ removed=(\d+) took=(\S+)`).FindStringSubmatch(e.daemonLog())
		if m == nil {
			b.Fatalf("the daemon logged no move of the files left in ignored places:\n%s", e.daemonLog())
		}
		for _, said := range []string{"agentbox: the launch left 4 files in git-ignored places", "agentbox: 4 more files the launch left in git-ignored places were removed"} {
			if !strings.Contains(out, said) {
				b.Errorf("the end of agentbox run does not say %q:\n%s", said, out)
			}
		}
		took, _ := time.ParseDuration(m[3])
		kept, _ := strconv.Atoi(m[1])
		removed, _ := strconv.Atoi(m[2])
		b.ReportMetric(took.Seconds(), "check-s")
		b.ReportMetric(whole.Seconds(), "run-s")
		b.ReportMetric(float64(kept), "kept")
		b.ReportMetric(float64(removed), "removed")
		b.StartTimer()
	}
}
