//go:build linux

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tarGz returns a gzipped tar of files (name, body pairs: regular files, mode 0644), the
// layout of npm's and cargo's package archives.
func tarGz(t *testing.T, files ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for i := 0; i+1 < len(files); i += 2 {
		if err := tw.WriteHeader(&tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(files[i+1]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// npmTarball writes the npm package name@1.0.0, whose main module exports msg, as a packed
// tarball (npm pack's layout: package/…) at path, and returns its integrity (sha512-…).
func npmTarball(t *testing.T, path, name, msg string) string {
	t.Helper()
	b := tarGz(t,
		"package/package.json", `{"name":"`+name+`","version":"1.0.0","main":"index.js"}`+"\n",
		"package/index.js", "module.exports = "+jsString(msg)+";\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(b)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

func jsString(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

// npmProject writes a Node project in dir depending on name@1.0.0 with a lockfile that pins
// its integrity (as `npm install` would have written it; the registry host is never asked:
// npm ci --offline finds the tarball in the cache by its integrity).
func npmProject(t *testing.T, dir, name, integrity string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pkg := `{"name":"app","version":"1.0.0","dependencies":{"` + name + `":"1.0.0"}}` + "\n"
	lock := `{"name":"app","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{` +
		`"":{"name":"app","version":"1.0.0","dependencies":{"` + name + `":"1.0.0"}},` +
		`"node_modules/` + name + `":{"version":"1.0.0","resolved":"https://registry.example.org/` + name + `/-/` + name + `-1.0.0.tgz","integrity":"` + integrity + `"}}}` + "\n"
	for f, body := range map[string]string{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hostTool runs a command on the host as the environment's user would, unboxed, in dir.
func hostTool(e *Env, dir string, args ...string) (string, error) {
	c := exec.Command(args[0], args[1:]...)
	c.Dir = dir
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.Home, "LANG=C.UTF-8", "npm_config_update_notifier=false"}
	out, err := c.CombinedOutput()
	return string(out), err
}

// npmCI is the box's and the host's offline install of a project's locked dependencies.
const npmCI = `npm ci --offline --no-audit --no-fund`

// TestNpmInstallFromHostCache: a Node project whose dependency is only in the host's npm cache
// (~/.npm, filled by `npm cache add` of a local tarball: no registry) installs in a box with no
// network; what the first box adds to its npm cache is there for the second box of the
// workspace (the box cache's layer); the host's ~/.npm is unchanged, and what a box cached
// never reaches an unboxed npm. Before, ~/.npm in the box was an empty folder of the home's
// tmpfs: npm ci --offline failed with ENOTCACHED.
func TestNpmInstallFromHostCache(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed")
	}
	e := NewEnv(t)
	tgz := filepath.Join(e.Root, "abdep-1.0.0.tgz")
	integrity := npmTarball(t, tgz, "abdep", "from the host npm cache")
	if out, err := hostTool(e, e.Root, "npm", "cache", "add", tgz); err != nil {
		t.Fatalf("host npm cache add: %v\n%s", err, out)
	}
	app := filepath.Join(e.Work, "app")
	npmProject(t, app, "abdep", integrity)
	// A second package the first box caches from the workspace, for the second box.
	integrity2 := npmTarball(t, filepath.Join(app, "vendor", "abdep2-1.0.0.tgz"), "abdep2", "from the box cache")
	npmProject(t, filepath.Join(app, "second"), "abdep2", integrity2)
	// The host has installed the project itself, and its npm test runs node (node_modules/.bin
	// first on its PATH) on the package.
	if err := os.WriteFile(filepath.Join(app, "package.json"), []byte(`{"name":"app","version":"1.0.0","dependencies":{"abdep":"1.0.0"},`+
		`"scripts":{"test":"node -e 'console.log(require(\"abdep\"))'"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := hostTool(e, app, "sh", "-c", npmCI+" && npm test"); err != nil || !strings.Contains(out, "from the host npm cache") {
		t.Fatalf("host npm ci && npm test: %v\n%s", err, out)
	}
	hostModules := filepath.Join(app, "node_modules")
	modulesBefore := treeHash(t, hostModules)
	npmCache := filepath.Join(e.Home, ".npm")
	before := treeHash(t, npmCache)
	// The files of a project the box makes (made/, which has no package.json at launch).
	if err := os.Mkdir(filepath.Join(app, "tmpl"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(app, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(app, "tmpl", f+".in"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// plant makes the box's node in node_modules/.bin, which npm test runs first.
	const plant = `mkdir -p node_modules/.bin && printf '#!/bin/sh\necho BOX-PLANTED-NODE\n' > node_modules/.bin/node && chmod +x node_modules/.bin/node`

	// The box installs again, and plants code where the host's npm test runs it: a node in
	// node_modules/.bin, the package's own module. Its own install and require see both. It
	// also makes a project of its own, made/, installs it and plants the same there: the
	// folder is not the box's own (there was no package.json at launch), and its npm test
	// runs it.
	r := e.runIn(app, "run", "sh", "--", "-c", npmCI+` && node -e 'console.log(require("abdep"))' && npm cache add ./vendor/abdep2-1.0.0.tgz &&
`+plant+` && echo 'module.exports = "BOX-PLANTED-MODULE";' > node_modules/abdep/index.js && npm test &&
mkdir made && cp tmpl/package.json.in made/package.json && cp tmpl/package-lock.json.in made/package-lock.json && cd made && `+npmCI+` && `+plant+` && npm test`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "from the host npm cache") || strings.Count(r.Stdout, "BOX-PLANTED-NODE") != 2 {
		t.Fatalf("first box: npm ci --offline from the host's cache, then npm test with what it planted, in app and in the project it made: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if after := treeHash(t, npmCache); after != before {
		t.Errorf("the host's npm cache %s changed while the first box installed", npmCache)
	}
	// The project the box made: its node_modules was moved aside when the box ended, so the
	// host's npm test there does not run the box's node. Before, it did.
	made := filepath.Join(app, "made")
	if out, _ := hostTool(e, made, "npm", "test"); strings.Contains(out, "BOX-PLANTED") {
		t.Errorf("the host's npm test in the project the box made ran the box's node_modules:\n%s", out)
	}
	if _, err := os.Lstat(filepath.Join(made, "node_modules")); !os.IsNotExist(err) {
		t.Errorf("the node_modules the box made is in the workspace (%v)", err)
	} else if _, err := os.Lstat(filepath.Join(made, ".agentbox-quarantined-1", "node_modules")); err != nil {
		t.Errorf("the node_modules the box made was not moved aside: %v", err)
	}
	// node_modules was the box's own (an overlay of the host's under the box cache's layer):
	// the host's folder is as it was and its npm test runs the host's package. Before, it ran
	// the box's node_modules/.bin/node.
	if out, err := hostTool(e, app, "npm", "test"); err != nil || !strings.Contains(out, "from the host npm cache") || strings.Contains(out, "BOX-PLANTED") {
		t.Errorf("the host's npm test after the box (%v):\n%s", err, out)
	}
	if treeHash(t, hostModules) != modulesBefore {
		t.Errorf("the box changed the host's %s", hostModules)
	}
	before = treeHash(t, npmCache) // the host's npm test logs there
	// The second box installs a project the host never installed; then the host removes its
	// own app/node_modules while the box runs (the box waits on a FIFO), which detaches the
	// box's overlay there, and the box installs app again and plants its node: that folder is
	// in the workspace now, and is moved aside when the box ends. Before, the host's npm test
	// ran the box's node.
	sync1, sync2 := filepath.Join(app, "sync1"), filepath.Join(app, "sync2")
	for _, f := range []string{sync1, sync2} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := e.Command(ctx, "run", "sh", "--", "-c", `cd second && `+npmCI+` && node -e 'console.log(require("abdep2"))' && echo ready > ../sync1 && read x < ../sync2 &&
cd .. && ls node_modules 2>&1; `+npmCI+` && `+plant+` && npm test`)
	c.Dir = app
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	ready := make(chan error, 1)
	go func() { _, err := os.ReadFile(sync1); ready <- err }()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-done:
		t.Fatalf("second box ended before the host removed its node_modules (%v)\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if err := os.RemoveAll(hostModules); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sync2, []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || !strings.Contains(stdout.String(), "from the box cache") || !strings.Contains(stdout.String(), "BOX-PLANTED-NODE") {
		t.Fatalf("second box: npm ci --offline of what the first box cached, then of app after the host removed its node_modules: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	// A project the host never installed: the box's node_modules was its own there too, held
	// by an empty folder the daemon removed at the end. Before, it stayed in the workspace.
	if _, err := os.Lstat(filepath.Join(app, "second", "node_modules")); !os.IsNotExist(err) {
		t.Errorf("the second box's node_modules is in the workspace (%v)", err)
	}
	if after := treeHash(t, npmCache); after != before {
		t.Errorf("the host's npm cache %s changed while boxes installed", npmCache)
	}
	if out, _ := hostTool(e, app, "npm", "test"); strings.Contains(out, "BOX-PLANTED") {
		t.Errorf("the host's npm test after it removed node_modules while a box ran ran the box's node:\n%s", out)
	}
	if _, err := os.Lstat(filepath.Join(app, ".agentbox-quarantined-1", "node_modules")); err != nil {
		t.Errorf("the node_modules the box made after the host removed its own was not moved aside: %v", err)
	}
	// What the boxes cached is the box cache's: an unboxed npm does not find it.
	os.RemoveAll(filepath.Join(app, "second", "node_modules"))
	if out, err := hostTool(e, filepath.Join(app, "second"), "sh", "-c", npmCI); err == nil || !strings.Contains(out, "ENOTCACHED") {
		t.Errorf("the host's npm installed abdep2, which only a box cached (err %v):\n%s", err, out)
	}
}

// pythonTools skips the test unless /usr/bin/python3 has pip and setuptools (Debian's
// python3-pip, python3-setuptools).
func pythonTools(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import setuptools, pip").CombinedOutput(); err != nil {
		t.Skipf("%s has no pip or setuptools: %v %s", py, err, out)
	}
	return py
}

// pySdist writes the source distribution of the Python package name 1.0 (its module's MSG is
// msg) into dir, built by setuptools. Its pyproject.toml asks for setuptools as the build
// backend, so pip can build it only with an index or without build isolation: offline, pip
// installs it only from a wheel it has cached for this sdist.
func pySdist(t *testing.T, py, src, dir, name, msg string) {
	t.Helper()
	files := map[string]string{
		"setup.py":            "from setuptools import setup\nsetup(name=" + jsString(name) + ", version=\"1.0\", packages=[" + jsString(name) + "])\n",
		"pyproject.toml":      "[build-system]\nrequires = [\"setuptools>=40.8\"]\nbuild-backend = \"setuptools.build_meta\"\n",
		"README":              "test package\n",
		name + "/__init__.py": "MSG = " + jsString(msg) + "\n",
	}
	for f, body := range files {
		p := filepath.Join(src, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := exec.Command(py, "setup.py", "-q", "sdist", "-d", dir)
	c.Dir = src
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("sdist %s: %v\n%s", name, err, out)
	}
}

// TestPipInstallFromHostCache: a Python project that vendors its dependency's source
// distribution installs in a box with no index (pip --no-index --find-links vendor) from the
// wheel the host's pip built and cached for it (~/.cache/pip: building it again would need
// the build backend from an index); a wheel the first box builds is in the second box's pip
// cache (the box cache's layer); the host's pip cache is unchanged, and a wheel a box cached
// never reaches an unboxed pip. Before, ~/.cache/pip in the box was empty and pip failed to
// get setuptools for the build. And the bytecode the box's python compiles goes to the box
// cache (PYTHONPYCACHEPREFIX): before, the host's python ran the box's
// __pycache__/abmod.cpython-3*.pyc of a module the box had changed and put back. An extension
// module the box builds beside abmod3.py is moved aside (review 12, F2).
func TestPipInstallFromHostCache(t *testing.T) {
	t.Parallel() // its own daemon and upstreams; mostly waits (parallelTests)
	py := pythonTools(t)
	e := NewEnv(t)
	app := filepath.Join(e.Work, "app")
	vendor := filepath.Join(app, "vendor")
	pySdist(t, py, filepath.Join(e.Root, "src1"), vendor, "abpy", "from the host pip cache")
	pySdist(t, py, filepath.Join(e.Root, "src2"), vendor, "abpy2", "from the box cache")
	pipInstall := py + " -m pip install --disable-pip-version-check --no-index --find-links vendor --target "
	// The host's own install builds the wheel (with the host's setuptools) and caches it.
	if out, err := hostTool(e, app, "sh", "-c", pipInstall+filepath.Join(e.Root, "hostsite")+" --no-build-isolation abpy"); err != nil {
		t.Fatalf("host pip install: %v\n%s", err, out)
	}
	pipCache := filepath.Join(e.Home, ".cache", "pip")
	before := treeHash(t, pipCache)
	// A module of the workspace, which the box imports after changing it and then puts back
	// as it was, mtime and size included: python takes bytecode whose header matches the
	// source's mtime and size for that source.
	const hostMod, boxMod = `print("from the workspace abmod")` + "\n", `print("BOX-COMPILED abmod here!")` + "\n"
	if len(hostMod) != len(boxMod) {
		t.Fatal("the two versions of abmod.py differ in size")
	}
	// abmod2 the same, but the box writes the bytecode beside it itself (python without
	// PYTHONPYCACHEPREFIX): the daemon moves it aside at the latest when the launch ends.
	const hostMod2, boxMod2 = `print("from the workspace abmod2")` + "\n", `print("BOX-WROTE abmod2 here!!!!")` + "\n"
	if len(hostMod2) != len(boxMod2) {
		t.Fatal("the two versions of abmod2.py differ in size")
	}
	for f, body := range map[string]string{"abmod.py": hostMod, "abmod2.py": hostMod2, "abmod3.py": `print("from the workspace abmod3")` + "\n"} {
		if err := os.WriteFile(filepath.Join(app, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// abmod3: the box builds an extension module beside abmod3.py (review 12, F2), which
	// python imports before the source; the daemon moves it aside. Only where gcc and
	// Python.h are there (the box uses the host's, read-only).
	extBuild := ""
	if _, err := exec.LookPath("gcc"); err == nil {
		if inc, err := hostTool(e, app, py, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"); err == nil {
			if _, err := os.Stat(filepath.Join(strings.TrimSpace(inc), "Python.h")); err == nil {
				extBuild = ` &&
printf '#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "abmod3", NULL, -1, NULL};\nPyMODINIT_FUNC PyInit_abmod3(void) { puts("BOX-BUILT abmod3"); fflush(stdout); return PyModule_Create(&m); }\n' > /tmp/m.c &&
gcc -shared -fPIC -I` + strings.TrimSpace(inc) + ` -o "abmod3$(` + py + ` -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')" /tmp/m.c`
			}
		}
	}
	if extBuild == "" {
		t.Log("no gcc or Python.h: the extension module part (abmod3) is left out")
	}

	// The host's virtualenv of the project, which its shell activates and its python starts
	// from.
	if out, err := hostTool(e, app, py, "-m", "venv", "--without-pip", ".venv"); err != nil {
		t.Fatalf("host python3 -m venv: %v\n%s", err, out)
	}
	hostVenv := filepath.Join(app, ".venv")
	venvBefore := treeHash(t, hostVenv)
	// A virtualenv of another name, venv/ (a copy: pyvenv.cfg and the python symlink are
	// absolute), told by its pyvenv.cfg.
	hostVenv2 := filepath.Join(app, "venv")
	if out, err := exec.Command("cp", "-a", hostVenv, hostVenv2).CombinedOutput(); err != nil {
		t.Fatalf("cp -a .venv venv: %v\n%s", err, out)
	}
	venv2Before := treeHash(t, hostVenv2)

	// The box installs abpy into the virtualenv, and plants code where the host runs it: a
	// line in bin/activate, a .pth file that python's site runs at every start.
	r := e.runIn(app, "run", "sh", "--", "-c", `site=$(echo .venv/lib/python3*/site-packages) && `+pipInstall+`"$site" abpy && .venv/bin/python -c 'import abpy; print(abpy.MSG)' &&
echo 'import sys; print("BOX-PLANTED-PTH")' > "$site/abbox.pth" && echo 'echo BOX-PLANTED-ACTIVATE' >> .venv/bin/activate && . .venv/bin/activate && python3 -c 'import abpy' &&
echo 'echo BOX-PLANTED-VENV2' >> venv/bin/activate && python3 -m venv --without-pip made-venv && echo 'echo BOX-PLANTED-MADE' >> made-venv/bin/activate &&
`+pipInstall+`/tmp/site2 --no-build-isolation abpy2 &&
cp -p abmod.py /tmp/abmod.py && printf '%s' '`+boxMod+`' > abmod.py && touch -r /tmp/abmod.py abmod.py && `+py+` -c 'import abmod' && cp -p /tmp/abmod.py abmod.py &&
cp -p abmod2.py /tmp/abmod2.py && printf '%s' '`+boxMod2+`' > abmod2.py && touch -r /tmp/abmod2.py abmod2.py && env -u PYTHONPYCACHEPREFIX `+py+` -c 'import abmod2' && cp -p /tmp/abmod2.py abmod2.py`+extBuild)
	if r.Code != 0 || !strings.Contains(r.Stdout, "from the host pip cache") || !strings.Contains(r.Stdout, "BOX-COMPILED") || !strings.Contains(r.Stdout, "BOX-WROTE") ||
		!strings.Contains(r.Stdout, "BOX-PLANTED-ACTIVATE") || !strings.Contains(r.Stdout, "BOX-PLANTED-PTH") {
		t.Fatalf("first box: pip install --no-index from the host's wheel cache into .venv, python imports abmod: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	// .venv was the box's own (an overlay of the host's under the box cache's layer): the
	// host's is as it was, activating it and starting its python run nothing of the box's, and
	// what the box installed there is not in it. Before, the host's shell echoed the box's
	// line and its python printed the .pth's.
	if out, err := hostTool(e, app, "sh", "-c", `. .venv/bin/activate && python3 -c 'import sys; print(sys.prefix)'`); err != nil || strings.Contains(out, "BOX-PLANTED") || !strings.Contains(out, hostVenv) {
		t.Errorf("the host's activate and python of .venv after the box (%v):\n%s", err, out)
	}
	if out, err := hostTool(e, app, filepath.Join(hostVenv, "bin", "python"), "-c", "import abpy"); err == nil {
		t.Errorf("the host's .venv has abpy, which only the box installed:\n%s", out)
	}
	if treeHash(t, hostVenv) != venvBefore {
		t.Errorf("the box changed the host's %s", hostVenv)
	}
	// venv/ was the box's own too (before, only a .venv was: the host's activate echoed the
	// box's line), and the virtualenv the box made, made-venv/, was moved aside when it ended
	// (before, it stayed, and activating it ran the box's line).
	if treeHash(t, hostVenv2) != venv2Before {
		t.Errorf("the box changed the host's %s", hostVenv2)
	}
	if out, _ := hostTool(e, app, "sh", "-c", `. venv/bin/activate; . made-venv/bin/activate`); strings.Contains(out, "BOX-PLANTED") {
		t.Errorf("the host's activate of venv and made-venv ran the box's line:\n%s", out)
	}
	if _, err := os.Lstat(filepath.Join(app, "made-venv")); !os.IsNotExist(err) {
		t.Errorf("the virtualenv the box made is in the workspace (%v)", err)
	} else if _, err := os.Lstat(filepath.Join(app, ".agentbox-quarantined-1", "made-venv", "pyvenv.cfg")); err != nil {
		t.Errorf("the virtualenv the box made was not moved aside: %v", err)
	}
	// The box's python wrote its bytecode to the box cache: the host's python imports the
	// workspace's abmod.py, not what the box compiled. Before, it ran the box's
	// __pycache__/abmod.cpython-3*.pyc.
	if pyc, _ := filepath.Glob(filepath.Join(app, "__pycache__", "abmod.*")); len(pyc) != 0 {
		t.Errorf("the box's python wrote bytecode in the workspace: %v", pyc)
	}
	if out, err := hostTool(e, app, py, "-c", "import abmod"); err != nil || out != "from the workspace abmod\n" {
		t.Errorf("the host's python's import of abmod printed %q (%v), want the workspace's abmod.py's line", out, err)
	}
	// The bytecode the box wrote itself is moved aside (review 10, F1): before, the host's
	// python imported it and printed the box's line.
	if aside, _ := filepath.Glob(filepath.Join(app, "__pycache__", "abmod2.*.pyc.agentbox-quarantined-*")); len(aside) != 1 {
		t.Errorf("the bytecode the box wrote for abmod2 was not moved aside: %v", aside)
	}
	if out, err := hostTool(e, app, py, "-c", "import abmod2"); err != nil || out != "from the workspace abmod2\n" {
		t.Errorf("the host's python's import of abmod2 printed %q (%v), want the workspace's abmod2.py's line", out, err)
	}
	// The extension module the box built beside abmod3.py is moved aside: before, the host's
	// python imported it (the box's code ran in the host's python) and git status showed
	// nothing (*.so is commonly ignored).
	if extBuild != "" {
		// (The box's own import may already find it moved aside: the watch acts on the file
		// event.)
		if aside, _ := filepath.Glob(filepath.Join(app, "abmod3.*so.agentbox-quarantined-*")); len(aside) != 1 {
			t.Errorf("the extension module the box built beside abmod3.py was not moved aside: %v", aside)
		}
		if out, err := hostTool(e, app, py, "-c", "import abmod3"); err != nil || out != "from the workspace abmod3\n" {
			t.Errorf("the host's python's import of abmod3 printed %q (%v), want the workspace's abmod3.py's line", out, err)
		}
	}
	r = e.runIn(app, "run", "sh", "--", "-c", pipInstall+`/tmp/site abpy2 && PYTHONPATH=/tmp/site `+py+` -c 'import abpy2; print(abpy2.MSG)'`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "from the box cache") || !strings.Contains(r.Stdout, "Using cached abpy2") {
		t.Fatalf("second box: pip install of the wheel the first box cached: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if after := treeHash(t, pipCache); after != before {
		t.Errorf("the host's pip cache %s changed while boxes installed", pipCache)
	}
	if out, err := hostTool(e, app, "sh", "-c", pipInstall+filepath.Join(e.Root, "hostsite2")+" abpy2"); err == nil {
		t.Errorf("the host's pip installed abpy2 offline, from a wheel only a box cached:\n%s", out)
	}
}

// TestAttackPackageCaches: the box sees the host's npm and pip caches, cargo's home and go's
// module cache, and changes none of them — create, append, rename, remove, chmod and symlink
// beneath each land in the box cache's layer — and cannot read the registry token in ~/.cargo/credentials.toml
// (masked whether or not ~/.cargo/bin is on PATH: not here); a box that replaces its layer
// with a symlink to a host folder does not make the next box write there (the daemon removes
// the symlink; box-init would refuse one). Before, the host's caches were not in the box at
// all (the box does not see them).
func TestAttackPackageCaches(t *testing.T) {
	e := NewEnv(t)
	npmFile := filepath.Join(e.Home, ".npm", "_cacache", "content-v2", "sha512", "ab", "cd", "entry")
	pipFile := filepath.Join(e.Home, ".cache", "pip", "wheels", "ab", "cd", "x-1.0-py3-none-any.whl")
	cargoFile := filepath.Join(e.Home, ".cargo", "registry", "cache", "registry.example.org-0123456789abcdef", "x-1.0.0.crate")
	modFile := filepath.Join(e.Home, "go", "pkg", "mod", "example.org", "x@v1.0.0", "x.go")
	cred := filepath.Join(e.Home, ".cargo", "credentials.toml")
	for _, p := range []string{npmFile, pipFile, cargoFile, modFile} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("host-cache-entry\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(cred, []byte("[registry]\ntoken = \"SECRET-CARGO-TOKEN\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caches := []string{filepath.Join(e.Home, ".npm"), filepath.Join(e.Home, ".cache", "pip"), filepath.Join(e.Home, ".cargo"), filepath.Join(e.Home, "go")}
	before := map[string]string{}
	for _, d := range caches {
		before[d] = treeHash(t, d)
	}
	script := `cat ` + npmFile + ` ` + pipFile + ` ` + cargoFile + ` ` + modFile + `; cat ` + cred + ` 2>/dev/null
grep -e ' ` + filepath.Join(e.Home, ".npm") + ` ' -e ' ` + filepath.Join(e.Home, ".cache", "pip") + ` ' -e ' ` + filepath.Join(e.Home, ".cargo") + ` ' /proc/self/mountinfo >&2
echo x >> ` + cred + ` 2>/dev/null && echo "WROTE credentials"
for p in ` + npmFile + ` ` + pipFile + ` ` + cargoFile + ` ` + modFile + `; do
  d=$(dirname "$p")
  touch "$d/planted"; echo x >> "$p"; chmod 777 "$p"; mv "$p" "$p.moved"; ln -s /tmp "$d/link"; rm -rf "$d/../"*
done
echo done`
	r := e.Box(script)
	if r.Code != 0 || strings.Count(r.Stdout, "host-cache-entry") != 4 || !strings.Contains(r.Stdout, "done") {
		t.Fatalf("the box does not see the host's package caches: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout, "SECRET-CARGO-TOKEN") || strings.Contains(r.Stdout, "WROTE") {
		t.Errorf("the box read or wrote ~/.cargo/credentials.toml:\n%s", r.Stdout)
	}
	// The box turns its npm layer into a symlink to a host folder it cannot see (the box
	// cache is the box's to write); the next box writes to ~/.npm.
	victim := filepath.Join(e.Home, "victim")
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	before[victim] = treeHash(t, victim)
	boxCaches, _ := filepath.Glob(filepath.Join(e.State, "agentbox", "cache", "*"))
	if len(boxCaches) != 1 {
		t.Fatalf("box caches after the box: %v, want one", boxCaches)
	}
	layer := filepath.Join(boxCaches[0], "npm", "upper")
	r = e.Box(`rm -rf ` + layer + ` && ln -s ` + victim + ` ` + layer + ` && echo swapped`)
	if !strings.Contains(r.Stdout, "swapped") {
		t.Fatalf("could not swap the layer %s: exit %d\nstdout:\n%s\nstderr:\n%s", layer, r.Code, r.Stdout, r.Stderr)
	}
	r = e.Box(`touch ` + filepath.Join(e.Home, ".npm", "through-the-link") + ` && echo wrote`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "wrote") {
		t.Errorf("the box after the swap: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for d, h := range before {
		if treeHash(t, d) != h {
			t.Errorf("the host's %s changed", d)
		}
	}
}

// cargoToolchain gives e's home a Rust toolchain laid out as rustup lays it out — ~/.cargo/bin
// holding rustup's proxies, ~/.rustup the default toolchain's bin/ and lib/ (hard links to
// the calling user's rustup install: no copy) — and returns the PATH that runs it, ~/.cargo/bin
// first. Without a rustup install this user can link, the toolchain folder
// AGENTBOX_TEST_RUST_TOOLCHAIN names (scripts/test.sh's hard links of root's, under /opt, for
// its ordinary user) or a cargo in /usr/bin (Debian's cargo) serves, outside the home, without
// rustup's layout (~/.cargo/bin is empty), and the test skips when there is none.
func cargoToolchain(t *testing.T, e *Env) string {
	t.Helper()
	bin := filepath.Join(e.Home, ".cargo", "bin")
	if dir := os.Getenv("AGENTBOX_TEST_RUST_TOOLCHAIN"); dir != "" && os.Geteuid() != 0 {
		if _, err := os.Stat(filepath.Join(dir, "bin", "cargo")); err != nil {
			t.Fatalf("AGENTBOX_TEST_RUST_TOOLCHAIN=%s holds no bin/cargo: %v", dir, err)
		}
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		return bin + ":" + filepath.Join(dir, "bin") + ":" + os.Getenv("PATH")
	}
	home, _ := os.UserHomeDir()
	rustupHome, cargoHome := os.Getenv("RUSTUP_HOME"), os.Getenv("CARGO_HOME")
	if rustupHome == "" {
		rustupHome = filepath.Join(home, ".rustup")
	}
	if cargoHome == "" {
		cargoHome = filepath.Join(home, ".cargo")
	}
	settings, err := os.ReadFile(filepath.Join(rustupHome, "settings.toml"))
	tc := ""
	for _, l := range strings.Split(string(settings), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "default_toolchain = "); ok {
			tc = strings.Trim(v, `"`)
		}
	}
	if err == nil && tc != "" {
		dst := filepath.Join(e.Home, ".rustup", "toolchains", tc)
		err := os.MkdirAll(dst, 0o755)
		if err == nil {
			err = os.MkdirAll(bin, 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(e.Home, ".rustup", "settings.toml"), settings, 0o644)
		}
		if err == nil {
			err = os.Link(filepath.Join(cargoHome, "bin", "rustup"), filepath.Join(bin, "rustup"))
		}
		for _, p := range []string{"cargo", "rustc"} {
			if err == nil {
				err = os.Symlink("rustup", filepath.Join(bin, p))
			}
		}
		if err == nil {
			var out []byte
			src := filepath.Join(rustupHome, "toolchains", tc)
			if out, err = exec.Command("cp", "-al", filepath.Join(src, "bin"), filepath.Join(src, "lib"), dst).CombinedOutput(); err != nil {
				err = fmt.Errorf("%v: %s", err, out)
			}
		}
		if err != nil {
			t.Fatalf("lay out the rustup toolchain %s in the test's home: %v", tc, err)
		}
		return bin + ":" + os.Getenv("PATH")
	}
	if _, err := os.Stat("/usr/bin/cargo"); err == nil {
		return bin + ":" + os.Getenv("PATH")
	}
	t.Skipf("no Rust toolchain this user can use: no rustup install in %s (%v), no AGENTBOX_TEST_RUST_TOOLCHAIN and no /usr/bin/cargo (scripts/test.sh hard-links root's rustup toolchain for its ordinary user)", rustupHome, err)
	return ""
}

// cargoRegistry serves, on loopback, a sparse cargo registry holding the crate abcrate 1.0.0,
// whose msg() returns msg, and returns its index URL (sparse+http://…/). Only the host's
// cargo reaches it; a box has no route to the host's loopback.
func cargoRegistry(t *testing.T, msg string) (index string, stop func()) {
	t.Helper()
	crate := tarGz(t,
		"abcrate-1.0.0/Cargo.toml", "[package]\nname = \"abcrate\"\nversion = \"1.0.0\"\nedition = \"2021\"\n",
		"abcrate-1.0.0/src/lib.rs", "pub fn msg() -> &'static str { "+jsString(msg)+" }\n")
	sum := sha256.Sum256(crate)
	entry := `{"name":"abcrate","vers":"1.0.0","deps":[],"cksum":"` + hex.EncodeToString(sum[:]) + `","features":{},"yanked":false}` + "\n"
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/config.json":
			fmt.Fprintf(w, `{"dl":"%s/dl"}`, srv.URL)
		case "/ab/cr/abcrate":
			io.WriteString(w, entry)
		case "/dl/abcrate/1.0.0/download":
			w.Write(crate)
		default:
			http.NotFound(w, r)
		}
	}))
	return "sparse+" + srv.URL + "/", srv.Close
}

// cargoProject writes a binary crate in dir that prints abcrate::msg(), for crates-io (which
// the home's cargo configuration replaces with the test's registry).
func cargoProject(t *testing.T, dir string) {
	t.Helper()
	for f, body := range map[string]string{
		"Cargo.toml":  "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nabcrate = \"1.0.0\"\n",
		"src/main.rs": "fn main() { println!(\"{}\", abcrate::msg()); }\n",
	} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCargoBuildFromHostCache: a Rust project whose dependency is only in the host's cargo
// registry cache (~/.cargo/registry, filled by the host's `cargo fetch` from a registry on
// loopback, its extracted sources then removed as cargo's cache cleaning does) builds in a box
// with no network (`cargo build --offline`), and the box extracts the crate into the box
// cache's cargo layer, where the workspace's next box finds it (the layers persist as npm's
// and pip's do: TestNpmInstallFromHostCache and TestPipInstallFromHostCache launch a second
// box). The host's ~/.cargo is unchanged; what a box writes there —
// a crate's source rewritten after cargo extracted it, which cargo never checks again —
// never reaches an unboxed cargo, which builds from the host's own crate. Before, ~/.cargo was
// in the box only as the toolchain beside ~/.cargo/bin, read-only: the box failed with
// "failed to unpack package `abcrate v1.0.0` … Read-only file system". And the box's build of
// the crate it rewrote goes to the box cache (CARGO_TARGET_DIR), not to the workspace's
// target/: before, the host's `cargo run` in the workspace found the box's build fresh and
// printed "POISONED by a box" (review finding F2).
func TestCargoBuildFromHostCache(t *testing.T) {
	t.Parallel() // its own daemon, home and registry on a port of its own (parallelTests)
	e := NewEnv(t)
	path := cargoToolchain(t, e)
	const msg = "from the host cargo registry"
	index, stop := cargoRegistry(t, msg)
	defer stop()
	cargoHome := filepath.Join(e.Home, ".cargo")
	cfg := "[source.crates-io]\nreplace-with = \"abreg\"\n\n[source.abreg]\nregistry = \"" + index + "\"\n"
	if err := os.WriteFile(filepath.Join(cargoHome, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(e.Work, "app")
	cargoProject(t, app)
	if out, err := hostTool(e, app, "env", "PATH="+path, "cargo", "fetch"); err != nil {
		t.Fatalf("host cargo fetch: %v\n%s", err, out)
	}
	stop()
	// What remains is the downloaded crate and the index entry: a box must extract the crate.
	if err := os.RemoveAll(filepath.Join(cargoHome, "registry", "src")); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, cargoHome)
	for i, v := range e.Vars {
		if strings.HasPrefix(v, "PATH=") {
			e.Vars[i] = "PATH=" + path
		}
	}

	// The box builds and runs the app, rewrites the crate's extracted source (in its layer),
	// and builds again what that source now says (as the workspace's next box would, with
	// its own target folder), so that the box's build output holds the box's code.
	r := e.runIn(app, "run", "sh", "--", "-c", `cargo run --offline -q &&
for f in ~/.cargo/registry/src/*/abcrate-1.0.0/src/lib.rs; do
  echo 'pub fn msg() -> &'"'"'static str { "POISONED by a box" }' > "$f" && echo poisoned
done
cargo clean --offline -q -p abcrate && cargo run --offline -q &&
CARGO_TARGET_DIR=target cargo build --offline -q && ls target/debug/app && echo '[build]' >> ~/.cargo/config.toml && touch ~/.cargo/registry/cache/*/abcrate-1.0.0.crate && echo done`)
	if r.Code != 0 || !strings.Contains(r.Stdout, msg) || !strings.Contains(r.Stdout, "poisoned") || !strings.Contains(r.Stdout, "POISONED by a box") || !strings.Contains(r.Stdout, "done") {
		t.Fatalf("box: cargo build --offline from the host's registry cache: exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if treeHash(t, cargoHome) != before {
		t.Errorf("the host's cargo home %s changed while a box built", cargoHome)
	}
	// The crate the box extracted is in the workspace's cargo layer, for its next box.
	if ok, _ := filepath.Glob(filepath.Join(e.State, "agentbox", "cache", "*", "cargo", "upper", "registry", "src", "*", "abcrate-1.0.0", ".cargo-ok")); len(ok) != 1 {
		t.Errorf("the box cache's cargo layer does not hold the crate the box extracted (%v)", ok)
	}
	// The box's build output is in the box cache: the workspace has no target/ (review
	// finding F2: the host's `cargo run` ran the binary a box left there, fresh to cargo),
	// not even the one the box built there on purpose (CARGO_TARGET_DIR=target): target/ was
	// the box's own (docs/toolchains.md, "Dependency folders are the box's own"). Before, the
	// host's cargo run below ran the box's binary.
	if _, err := os.Lstat(filepath.Join(app, "target")); err == nil {
		t.Errorf("the box's cargo wrote %s in the workspace", filepath.Join(app, "target"))
	}
	// An unboxed `cargo run` in the workspace builds from the host's own crate: nothing the
	// box wrote or built reaches it.
	out, err := hostTool(e, app, "env", "PATH="+path, "cargo", "run", "--offline", "-q")
	if err != nil || !strings.Contains(out, msg) || strings.Contains(out, "POISONED") {
		t.Errorf("the host's cargo run after the box (err %v):\n%s", err, out)
	}
}
