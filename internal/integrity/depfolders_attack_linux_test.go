package integrity_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/integrity"
)

// hostRun runs a program on the host in dir and returns its combined output.
func hostRun(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("the host's %s %v in %s: %v\n%s", name, args, dir, err, out)
	}
	return string(out)
}

// ignoringRepo makes ws a repository (repo) whose .gitignore holds ignore, committed with
// what else ws holds.
func ignoringRepo(t testing.TB, ws, ignore string) {
	t.Helper()
	repo(t, ws)
	write(t, filepath.Join(ws, ".gitignore"), ignore)
	git(t, ws, "add", "-A")
	git(t, ws, "commit", "-q", "-m", "ignore")
}

// needPython skips a test without the host's python3.
func needPython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
}

// pthMarking is a .pth line that creates the file mark when python's site reads it.
func pthMarking(mark string) string {
	return fmt.Sprintf("import os; os.close(os.open(%q, os.O_CREAT | os.O_WRONLY))", mark)
}

// TestAttackDependencyDecoys: a box leaves 70 empty node_modules (git status shows none), more
// than the 64 dependency folders a launch makes the box's own; the host then installs web/, and
// the next box writes web/node_modules/.bin/hello. The host's npm test must run the host's
// hello: its folder, which holds something, comes before the empty ones. A box that fills one
// of the empty folders past the bound in place has it moved aside at exit. Before (review 14,
// F4), the decoys sorted first, web/node_modules was written in place, and npm test ran the
// box's hello.
func TestAttackDependencyDecoys(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	write(t, filepath.Join(e.work, "web", "package.json"), `{"name":"web","version":"1.0.0","scripts":{"test":"hello"}}`+"\n")
	ignoringRepo(t, e.work, "node_modules/\n")
	if out := e.boxPlant(`for i in $(seq -w 0 69); do mkdir -p a$i/node_modules; done; echo planted`); !strings.Contains(out, "planted") {
		t.Fatalf("the decoys were not made (the test would prove nothing):\n%s", out)
	}
	if st, _ := hostGit(e.work, "status", "--porcelain"); st != "" {
		t.Fatalf("git status shows the decoys, which the attack relies on not being seen: %q", st)
	}
	hello := filepath.Join(e.work, "web", "node_modules", ".bin", "hello")
	write(t, hello, "#!/bin/sh\necho host-hello\n")
	if err := os.Chmod(hello, 0o755); err != nil {
		t.Fatal(err)
	}
	out := e.boxPlant(`printf '#!/bin/sh\necho BOX-HELLO\n' > web/node_modules/.bin/hello
mkdir -p a69/node_modules/.bin && printf '#!/bin/sh\necho BOX-HELLO\n' > a69/node_modules/.bin/hello && echo wrote`)
	if !strings.Contains(out, "wrote") {
		t.Fatalf("the box's writes failed (the test would prove nothing):\n%s", out)
	}
	var got string
	if _, err := exec.LookPath("npm"); err == nil {
		got = hostRun(t, filepath.Join(e.work, "web"), "npm", "test")
	} else {
		got = hostRun(t, filepath.Join(e.work, "web"), hello)
	}
	if !strings.Contains(got, "host-hello") || strings.Contains(got, "BOX-HELLO") {
		t.Errorf("the host's npm test in web/ after the box: %q, want the host's hello\nthe box said:\n%s", got, out)
	}
	if _, err := os.Lstat(filepath.Join(e.work, "a69", "node_modules")); err == nil {
		t.Errorf("a69/node_modules, empty at launch and filled by the box in place, is still there")
	}
	if _, err := os.Lstat(filepath.Join(integrity.AsideDirPath(filepath.Join(e.work, "a69", "node_modules"), 1), ".bin", "hello")); err != nil {
		t.Errorf("a69/node_modules was not moved aside: %v", err)
	}
	if !e.lastLaunch().Drift {
		t.Errorf("the launch that filled a69/node_modules raised no alert")
	}
}

// TestAttackVenvPreseeded: a box makes venv/lib/python3.X/site-packages/zz.pth in a
// git-ignored venv/ without a pyvenv.cfg (no virtualenv yet); the host's python3 -m venv venv
// then keeps what site-packages holds, and its python runs the .pth at every start. The check
// at exit moves the folder aside, with an alert: the host's venv made afterwards is its own.
// Before (review 14, F6), it stayed and the host's python ran the box's line.
func TestAttackVenvPreseeded(t *testing.T) {
	t.Parallel()
	needPython(t)
	e := newDaemonEnv(t)
	ignoringRepo(t, e.work, "venv/\n")
	mark, _ := e.marker("preseeded-venv-pth")
	out := e.boxPlant(fmt.Sprintf(`for v in 3.8 3.9 3.10 3.11 3.12 3.13 3.14; do d=venv/lib/python$v/site-packages; mkdir -p $d; printf '%%s\n' %s > $d/zz.pth; done; echo planted`,
		shellQuote(pthMarking(mark))))
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	hostRun(t, e.work, "python3", "-m", "venv", "--without-pip", "venv")
	hostRun(t, e.work, filepath.Join(e.work, "venv", "bin", "python"), "-c", "print('host python ok')")
	notRun(t, mark, "the host's python of the venv it made after the box", out)
	if _, err := os.Lstat(filepath.Join(integrity.AsideDirPath(filepath.Join(e.work, "venv"), 1), "lib")); err != nil {
		t.Errorf("the box's venv/ was not moved aside: %v", err)
	}
	if !e.lastLaunch().Drift {
		t.Errorf("the launch raised no alert")
	}
}

// TestAttackHiddenVenvs: the host's virtualenvs in hidden folders — direnv's
// .direnv/python-3 (layout python), tox's .tox/py3, nox's .nox/tests — are the box's own: the
// box's .pth in their site-packages stays in its layer, and the host's python there does not
// run it. Before (review 14, F7), the launch did not look into hidden folders; the box wrote
// them in place.
func TestAttackHiddenVenvs(t *testing.T) {
	t.Parallel()
	needPython(t)
	e := newDaemonEnv(t)
	ignoringRepo(t, e.work, ".direnv/\n.tox/\n.nox/\n")
	venvs := []string{".direnv/python-3", ".tox/py3", ".nox/tests"}
	var script strings.Builder
	marks := map[string]string{}
	for _, v := range venvs {
		hostRun(t, e.work, "python3", "-m", "venv", "--without-pip", v)
		marks[v], _ = e.marker("hidden-venv-" + filepath.Base(v))
		fmt.Fprintf(&script, "for d in %s/lib/python3*/site-packages; do printf '%%s\\n' %s > $d/zz.pth; done\n", v, shellQuote(pthMarking(marks[v])))
	}
	script.WriteString("echo planted\n")
	out := e.boxPlant(script.String())
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	for _, v := range venvs {
		hostRun(t, e.work, filepath.Join(e.work, v, "bin", "python"), "-c", "print('host python ok')")
		notRun(t, marks[v], "the host's python of "+v, out)
	}
}

// TestAttackBuildToolAndEditorHooks: Maven's .mvn/jvm.config (and its other project files),
// Gradle's gradle.properties and wrapper properties, Cursor's and Windsurf's hooks.json,
// written by a box at the workspace's top (protected: kept as proposed changes) and in a
// project below it (moved aside at exit). The host's mvn -v, at the top and in the project,
// must not load the box's Java agent. Before (review 14, F5, F12), they stayed, and mvn -v ran
// the agent's premain.
func TestAttackBuildToolAndEditorHooks(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	mark, _ := e.marker("mvn-javaagent")
	agent := ""
	_, mvnErr := exec.LookPath("mvn")
	_, javacErr := exec.LookPath("javac")
	_, jarErr := exec.LookPath("jar")
	if mvnErr == nil && javacErr == nil && jarErr == nil {
		// The agent lies outside the workspace: the box only names it.
		dir := t.TempDir()
		os.Chmod(dir, 0o755)
		write(t, filepath.Join(dir, "A.java"), fmt.Sprintf("public class A { public static void premain(String a) throws Exception { new java.io.File(%q).createNewFile(); } }\n", mark))
		write(t, filepath.Join(dir, "m.txt"), "Premain-Class: A\n")
		hostRun(t, dir, "javac", "A.java")
		hostRun(t, dir, "jar", "cfm", "agent.jar", "m.txt", "A.class")
		agent = filepath.Join(dir, "agent.jar")
	}
	pom := "<project><modelVersion>4.0.0</modelVersion><groupId>x</groupId><artifactId>x</artifactId><version>1</version></project>\n"
	write(t, filepath.Join(e.work, "pom.xml"), pom)
	write(t, filepath.Join(e.work, "app", "pom.xml"), pom)
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "maven")
	plants := map[string]string{
		".mvn/jvm.config":                          "-javaagent:" + agent,
		".mvn/maven.config":                        "-s /tmp/pwned.xml",
		".mvn/extensions.xml":                      "<extensions/>",
		".mvn/wrapper/maven-wrapper.properties":    "distributionUrl=file:///tmp/pwned.zip",
		"gradle.properties":                        "org.gradle.jvmargs=-javaagent:" + agent,
		"gradle/wrapper/gradle-wrapper.properties": "distributionUrl=file:///tmp/pwned.zip",
		".cursor/hooks.json":                       `{"version":1,"hooks":{"sessionStart":[{"command":"touch /tmp/pwned"}]}}`,
		".windsurf/hooks.json":                     `{"hooks":{"pre_run_command":[{"command":"touch /tmp/pwned"}]}}`,
	}
	var script strings.Builder
	for rel, content := range plants {
		for _, p := range []string{rel, filepath.Join("app", rel)} {
			fmt.Fprintf(&script, "mkdir -p %s && printf '%%s\\n' %s > %s\n", filepath.Dir(p), shellQuote(content), p)
		}
	}
	script.WriteString("echo planted\n")
	out := e.boxPlant(script.String())
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	for rel := range plants {
		for _, p := range []string{rel, filepath.Join("app", rel)} {
			if _, err := os.Lstat(filepath.Join(e.work, p)); err == nil {
				t.Errorf("%s is where the tool reads it after the box", p)
			}
		}
	}
	if agent == "" {
		t.Log("mvn, javac or jar not installed: the host's mvn was not run")
		return
	}
	for _, dir := range []string{e.work, filepath.Join(e.work, "app")} {
		hostRun(t, dir, "mvn", "-v")
		notRun(t, mark, "the host's mvn -v in "+dir, out)
	}
}

// hostTry runs a program on the host in dir and returns its combined output, failing or not:
// after the check moved a folder aside, the host's tool is expected to fail for want of it.
func hostTry(dir string, name string, args ...string) string {
	c := exec.Command(name, args...)
	c.Dir = dir
	out, _ := c.CombinedOutput()
	return string(out)
}

// TestAttackDependencyFolderPastBounds: the host's own node_modules and .venv in projects six
// levels below the workspace's top, past the four the launch looks into, are not the box's own:
// the box writes them in place. It appends a line to an installed package's module and to the
// virtualenv's .pth, in place (same inodes: no folder appears). After the box, the host's npm
// test (or node) and the virtualenv's python must not run those lines: the check at exit moves
// both folders aside, with an alert. Before, nothing was moved, and the host's npm test printed
// the box's line and its python ran the box's .pth. The host's own install in app/node_modules
// while the box runs (a project the launch found: the box's own, which the box never writes)
// stays: the daemon tells the check which folders were the box's own.
func TestAttackDependencyFolderPastBounds(t *testing.T) {
	t.Parallel()
	needPython(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not installed")
	}
	e := newDaemonEnv(t)
	deep := filepath.Join("p", "a", "b", "c", "d")
	web := filepath.Join(e.work, deep, "web")
	write(t, filepath.Join(web, "package.json"), `{"name":"web","version":"1.0.0","scripts":{"test":"node index.js"}}`+"\n")
	write(t, filepath.Join(web, "index.js"), "require('greet')()\n")
	write(t, filepath.Join(web, "node_modules", "greet", "package.json"), `{"name":"greet","version":"1.0.0","main":"index.js"}`+"\n")
	write(t, filepath.Join(web, "node_modules", "greet", "index.js"), "module.exports = () => console.log('host-greet')\n")
	py := filepath.Join(e.work, deep, "py")
	write(t, filepath.Join(py, "pyproject.toml"), "[project]\nname = \"py\"\n")
	app := filepath.Join(e.work, "app")
	write(t, filepath.Join(app, "package.json"), `{"name":"app","version":"1.0.0"}`+"\n")
	write(t, filepath.Join(app, "node_modules", "x", "index.js"), "module.exports = 1\n")
	ignoringRepo(t, e.work, "node_modules/\n.venv/\n"+syncFIFO+"\n")
	hostRun(t, py, "python3", "-m", "venv", "--without-pip", ".venv")
	sites, _ := filepath.Glob(filepath.Join(py, ".venv", "lib", "python3*", "site-packages"))
	if len(sites) != 1 {
		t.Fatalf("the host's virtualenv has site-packages %v, want one", sites)
	}
	write(t, filepath.Join(sites[0], "host.pth"), "/nonexistent-host-path\n")
	if got := hostTry(web, "node", "index.js"); !strings.Contains(got, "host-greet") {
		t.Fatalf("the host's project does not run before the box (the test would prove nothing): %q", got)
	}
	mark, _ := e.marker("past-bounds-pth")
	rel := func(p string) string { r, _ := filepath.Rel(e.work, p); return r }
	hostLater := filepath.Join(app, "node_modules", "y", "index.js")
	out := e.boxPlantDuring(fmt.Sprintf(`set -e
printf '%%s\n' "console.log('BOX-GREET')" >> %s/node_modules/greet/index.js
printf '%%s\n' %s >> %s
node %s/index.js
echo ready > %s; read go < %s
echo planted`, rel(web), shellQuote(pthMarking(mark)), rel(filepath.Join(sites[0], "host.pth")), rel(web), syncFIFO, syncFIFO),
		func() { write(t, hostLater, "module.exports = 2\n") })
	if !strings.Contains(out, "BOX-GREET") || !strings.Contains(out, "planted") {
		t.Fatalf("the box did not write the host's folders in place (the test would prove nothing):\n%s", out)
	}
	var got string
	if _, err := exec.LookPath("npm"); err == nil {
		got = hostTry(web, "npm", "test")
	} else {
		got = hostTry(web, "node", "index.js")
	}
	if strings.Contains(got, "BOX-GREET") {
		t.Errorf("the host's npm test after the box ran the box's line: %q\nthe box said:\n%s", got, out)
	}
	hostTry(py, filepath.Join(py, ".venv", "bin", "python"), "-c", "pass")
	hostTry(py, "python3", "-c", "pass")
	notRun(t, mark, "the host's python of the virtualenv past the bounds", out)
	for _, p := range []string{filepath.Join(web, "node_modules"), filepath.Join(py, ".venv")} {
		if _, err := os.Lstat(integrity.AsideDirPath(p, 1)); err != nil {
			t.Errorf("%s was not moved aside: %v", p, err)
		}
	}
	if _, err := os.Lstat(hostLater); err != nil {
		t.Errorf("the host's own install in the box's own app/node_modules while the box ran was moved: %v", err)
	}
	if !e.lastLaunch().Drift {
		t.Errorf("the launch raised no alert")
	}
}
