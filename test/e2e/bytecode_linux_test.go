//go:build linux

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	r := e.runIn(a, "run", py, "--", "probe.py")
	pyc, link := field(r.Stdout, "PYC"), field(r.Stdout, "LINK")
	if r.Code != 0 || pyc == "" {
		t.Fatalf("probe in box A: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.HasPrefix(link, "/usr/lib/python3") || !strings.Contains(link, "/__pycache__/") {
		t.Fatalf("box A's bytecode of json.decoder is not the system's (the mirror): %s is %q", pyc, link)
	}
	sys, err := os.ReadFile(link)
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
		t.Errorf("box A wrote through the mirror's link to the system's bytecode:\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stdout, "POISONED by a box") {
		t.Errorf("box A's python did not run the bytecode it planted in its own layer (is the prefix its box cache?):\n%s", r.Stdout)
	}

	r = e.runIn(b, "run", "sh", "--", "-c", py+" probe.py && "+py+" -c 'import json.decoder'")
	if r.Code != 0 || strings.Contains(r.Stdout, "POISONED") {
		t.Errorf("box B (another workspace) ran box A's bytecode, or failed: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if got := field(r.Stdout, "LINK"); got != link {
		t.Errorf("box B's bytecode of json.decoder is %q, want the system's %q", got, link)
	}
	host := exec.Command(py, "-c", "import json.decoder")
	host.Env = []string{"HOME=" + e.Home, "PATH=/usr/bin:/bin"}
	if out, err := host.CombinedOutput(); err != nil || strings.Contains(string(out), "POISONED") {
		t.Errorf("the host's python: %v\n%s", err, out)
	}
	if after, err := os.ReadFile(link); err != nil || string(after) != string(sys) {
		t.Errorf("the system's %s changed: %v", link, err)
	}
	if treeHash(t, mirror) != before {
		t.Errorf("the mirror %s changed", mirror)
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
