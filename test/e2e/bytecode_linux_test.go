//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bytecodeProbe, run by the system's python in a box, prints where the box's python keeps
// json.decoder's bytecode (PYTHONPYCACHEPREFIX's layout) and what that file is: a link to the
// system's own bytecode, through the mirror the daemon makes (docs/toolchains.md).
const bytecodeProbe = `import importlib.util, os, json.decoder as m
f = importlib.util.cache_from_source(m.__file__)
print("PYC", f)
print("LINK", os.readlink(f) if os.path.islink(f) else "-")
`

// bytecodePoison, run by the system's python in a box, writes through the mirror's link (which
// must fail: it leads to the system's read-only bytecode), then replaces the link with
// bytecode of its own for json.decoder, valid for the system's source (its mtime and size in
// the header), which prints POISONED when imported.
const bytecodePoison = `import importlib._bootstrap_external as be, importlib.util, os, json.decoder as m
src = m.__file__
f = importlib.util.cache_from_source(src)
try:
    open(f, "ab").write(b"x")
    print("WROTE THROUGH the link")
except OSError as e:
    print("write through the link refused:", e)
st = os.stat(src)
code = compile("print('POISONED by a box')\n" + open(src).read(), src, "exec")
os.remove(f)
open(f, "wb").write(be._code_to_timestamp_pyc(code, st.st_mtime, st.st_size))
os.chmod(os.path.dirname(f), 0o777)
print("planted", f)
`

// TestAttackBytecodeMirror: the system's bytecode, mirrored by the daemon as the lower layer of
// every box's bytecode prefix (so that a workspace's first python does not compile the
// standard library and pip again), cannot be written by a box: writing through its links
// fails (they lead to the system's read-only files), and bytecode a box plants in their place
// lands in its own workspace's layer: its own python runs it (its workspace's boxes trust
// their box cache, as for go's), a box of another workspace and the host's python do not, and
// the mirror and the system's files are unchanged. Without the overlay (the mirror bound
// read-write at the prefix, tried by hand), box B printed POISONED.
func TestAttackBytecodeMirror(t *testing.T) {
	t.Parallel() // its own daemon (parallelTests)
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no system python: %v", err)
	}
	e := NewEnv(t)
	attackBytecodeMirror(t, e, py, "/usr/lib/python3")
}

// TestAttackPyenvBytecodeMirror: the same for a pyenv Python under the home (a copy of the
// system's python, or a hard-link tree of it, at pyenv's layout: ~/.pyenv/versions/X with its
// bin/ and lib/python3.N, selected by ~/.pyenv/version, ~/.pyenv/shims on PATH): its standard
// library's bytecode is mirrored too, so a workspace's first run of it does not compile its
// standard library; the box cannot write through the mirror's links (~/.pyenv is a read-only
// toolchain in the box), and bytecode it plants reaches neither a box of another workspace
// nor the host's run of that python. Before, box A's bytecode of json.decoder was no link
// (compiled into the box cache's layer at the first import in each workspace).
func TestAttackPyenvBytecodeMirror(t *testing.T) {
	t.Parallel() // its own daemon (parallelTests)
	sys := "/usr/bin/python3"
	if _, err := os.Stat(sys); err != nil {
		t.Skipf("no system python: %v", err)
	}
	out, err := exec.Command(sys, "-c", "import os, sys; print(os.path.dirname(os.__file__)); print(os.path.realpath(sys.executable))").Output()
	lines := strings.Fields(string(out))
	if err != nil || len(lines) != 2 {
		t.Fatalf("the system python's library: %v %q", err, out)
	}
	lib, bin := lines[0], lines[1]
	e := NewEnv(t)
	root := filepath.Join(e.Home, ".pyenv")
	prefix := filepath.Join(root, "versions", "3.99.1")
	for _, d := range []string{filepath.Join(prefix, "bin"), filepath.Join(prefix, "lib"), filepath.Join(root, "shims")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A hard-link tree where the user may link the system's files (root), else a copy; cp -a
	// keeps the sources' times, which the bytecode's headers name.
	if hl, err := exec.Command("cp", "-al", lib, filepath.Join(prefix, "lib")).CombinedOutput(); err != nil {
		os.RemoveAll(filepath.Join(prefix, "lib", filepath.Base(lib)))
		if out, err := exec.Command("cp", "-a", lib, filepath.Join(prefix, "lib")).CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v\n%s (hard links: %s)", lib, err, out, hl)
		}
	}
	py := filepath.Join(prefix, "bin", filepath.Base(bin))
	if out, err := exec.Command("cp", bin, py).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v\n%s", bin, err, out)
	}
	if err := os.WriteFile(filepath.Join(root, "version"), []byte("3.99.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, v := range e.Vars {
		if strings.HasPrefix(v, "PATH=") {
			e.Vars[i] = "PATH=" + filepath.Join(root, "shims") + ":" + os.Getenv("PATH")
		}
	}
	attackBytecodeMirror(t, e, py, filepath.Join(prefix, "lib", "python3"))
}

// attackBytecodeMirror is the attack of TestAttackBytecodeMirror with python py, whose
// library's folder starts with lib: box A's bytecode of json.decoder is the mirror's link to
// py's own; box A cannot write through it, and what it plants instead runs in box A only.
func attackBytecodeMirror(t *testing.T, e *Env, py, lib string) {
	a, b := filepath.Join(e.Work, "a"), filepath.Join(e.Work, "b")
	for _, ws := range []string{a, b} {
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{"probe.py": bytecodeProbe, "poison.py": bytecodePoison} {
			if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The daemon makes the mirror in the background: a first launch starts it (and runs
	// without it when it is not made soon enough); the test waits until a launch finds it.
	waitMirror(t, e, py, lib)
	r := e.runIn(a, "run", py, "--", "probe.py")
	pyc, link := field(r.Stdout, "PYC"), field(r.Stdout, "LINK")
	if r.Code != 0 || pyc == "" {
		t.Fatalf("probe in box A: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.HasPrefix(link, lib) || !strings.Contains(link, "/__pycache__/") {
		t.Fatalf("box A's bytecode of json.decoder is not %s's own (the mirror): %s is %q", lib, pyc, link)
	}
	orig, err := os.ReadFile(link)
	if err != nil {
		t.Fatal(err)
	}
	mirror := filepath.Join(e.RuntimeDir(), "bytecode")
	before := treeHash(t, mirror)

	r = e.runIn(a, "run", "sh", "--", "-c", py+" poison.py && "+py+" -c 'import json.decoder'")
	if r.Code != 0 || !strings.Contains(r.Stdout, "planted") {
		t.Fatalf("box A could not plant its bytecode: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout, "WROTE THROUGH") {
		t.Errorf("box A wrote through the mirror's link to %s's bytecode:\n%s", lib, r.Stdout)
	}
	if !strings.Contains(r.Stdout, "POISONED by a box") {
		t.Errorf("box A's python did not run the bytecode it planted in its own layer (is the prefix its box cache?):\n%s", r.Stdout)
	}

	r = e.runIn(b, "run", "sh", "--", "-c", py+" probe.py && "+py+" -c 'import json.decoder'")
	if r.Code != 0 || strings.Contains(r.Stdout, "POISONED") {
		t.Errorf("box B (another workspace) ran box A's bytecode, or failed: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if got := field(r.Stdout, "LINK"); got != link {
		t.Errorf("box B's bytecode of json.decoder is %q, want %q", got, link)
	}
	host := exec.Command(py, "-c", "import json.decoder")
	host.Env = []string{"HOME=" + e.Home, "PATH=/usr/bin:/bin"}
	if out, err := host.CombinedOutput(); err != nil || strings.Contains(string(out), "POISONED") {
		t.Errorf("the host's python: %v\n%s", err, out)
	}
	if after, err := os.ReadFile(link); err != nil || string(after) != string(orig) {
		t.Errorf("%s changed: %v", link, err)
	}
	if treeHash(t, mirror) != before {
		t.Errorf("the mirror %s changed", mirror)
	}
}

// waitMirror waits (at most two minutes) until the box of a launch of py, as the test's
// launches run it, finds its bytecode of json.decoder in the mirror (a link to the library
// whose folder starts with lib): each try runs the probe in a workspace of its own, whose
// layer is empty (what a try's python compiles stays in its own workspace's layer).
func waitMirror(t *testing.T, e *Env, py, lib string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; ; i++ {
		ws := filepath.Join(e.Work, fmt.Sprintf("warm%d", i))
		if err := os.MkdirAll(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "probe.py"), []byte(bytecodeProbe), 0o644); err != nil {
			t.Fatal(err)
		}
		r := e.runIn(ws, "run", py, "--", "probe.py")
		if r.Code != 0 {
			t.Fatalf("probe in a warm-up workspace: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
		}
		if strings.HasPrefix(field(r.Stdout, "LINK"), lib) {
			// and no other mirror is still being made (its folder would change the tree
			// the test compares)
			for ; time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if ms, _ := filepath.Glob(filepath.Join(e.RuntimeDir(), "bytecode", ".new-*")); len(ms) == 0 {
					return
				}
			}
			t.Fatal("a bytecode mirror is still being made after two minutes")
		}
		if time.Now().After(deadline) {
			t.Fatalf("no launch found a bytecode mirror of %s after %d tries:\n%s", lib, i+1, r.Stdout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// field returns the rest of the first line of out that starts with key and a space.
func field(out, key string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, key+" "); ok {
			return v
		}
	}
	return ""
}
