package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/plan"
)

// TestDependencyOverlays: the dependency folders of the workspace's projects — at the top, in
// the start folder and up to four folders below the top — and every Python virtualenv there,
// whatever its name (a pyvenv.cfg: venv/, env/, a hidden .env/), are overlays of the host's
// folder under the box cache's layer, the lower layer opened beneath the workspace; one absent
// on the host gets an empty placeholder while the launch holds it, removed when it ends. A
// name that is a symlink, a target/ with no Cargo.toml beside it, a folder deeper down or
// hidden is left as the host has it.
func TestDependencyOverlays(t *testing.T) {
	ws := t.TempDir()
	write := func(rel string) {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(rel string) {
		if err := os.MkdirAll(filepath.Join(ws, rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("package.json")                    // node_modules present (below)
	write("app/package.json")                // app/node_modules absent: a placeholder
	mkdir(".venv/bin")                       // present: the host's below
	mkdir("target")                          // no Cargo.toml: a folder like any other
	write("crates/x/Cargo.toml")             // two below the top: crates/x/target
	write("packages/web/ui/package.json")    // three below (a monorepo's packages/*/*)
	write("web/package.json")                // web/node_modules, present as a symlink: left out
	write("py/venv/pyvenv.cfg")              // a virtualenv named venv/
	write(".env/pyvenv.cfg")                 // a hidden one, at the top
	write("a/b/c/d/env/pyvenv.cfg")          // five below: a subfolder of the deepest looked into
	write("a/b/c/d/e/requirements.txt")      // five below: only as the start folder
	write("a/b/c/d/e/f/g/venv2/pyvenv.cfg")  // deeper: not found
	write("py/venv/lib/x/node_modules/y.js") // inside a virtualenv: not looked into
	write(".hidden/package.json")
	write("node_modules/p/package.json") // the host's node_modules; never a project of its own
	if err := os.Symlink(t.TempDir(), filepath.Join(ws, "web", "node_modules")); err != nil {
		t.Fatal(err)
	}
	cwd := filepath.Join(ws, "a", "b", "c", "d", "e")
	want := []string{
		filepath.Join(ws, ".env"),
		filepath.Join(ws, ".venv"),
		filepath.Join(ws, "a", "b", "c", "d", "e", ".venv"),
		filepath.Join(ws, "a", "b", "c", "d", "env"),
		filepath.Join(ws, "app", "node_modules"),
		filepath.Join(ws, "crates", "x", "target"),
		filepath.Join(ws, "node_modules"),
		filepath.Join(ws, "packages", "web", "ui", "node_modules"),
		filepath.Join(ws, "py", "venv"),
	}
	if got, past, _ := dependencyFolders(ws, cwd); !reflect.DeepEqual(got, want) || len(past) != 0 {
		t.Fatalf("dependencyFolders = %v (%v past the bound), want %v", got, past, want)
	}
	if got, _, _ := dependencyFolders(ws, ws); slices.Contains(got, filepath.Join(ws, "a", "b", "c", "d", "e", ".venv")) {
		t.Errorf("a project five folders down is found without being the start folder: %v", got)
	}

	state := t.TempDir()
	d := &Daemon{stateDir: state, integrity: newIntegrityBroker(integrityDeps{StateDir: state})}
	var c plan.Contributions
	if notice, err := d.dependencyOverlays("L1", ws, cwd, plan.WorkspaceFacts{}, &c); err != nil || notice != "" {
		t.Fatal(notice, err)
	}
	cache := boxCache(state, ws)
	for _, p := range want {
		rel, _ := filepath.Rel(ws, p)
		layer := filepath.Join(cache, depFolderLayer(rel))
		m := plan.Mount{Kind: plan.MountOverlay, Source: p, Upper: filepath.Join(layer, "upper"), Work: filepath.Join(cache, "work", "L1", depFolderLayer(rel)),
			Target: p, Beneath: cache, SourceBeneath: ws}
		if !slices.Contains(c.Mounts, m) {
			t.Errorf("no overlay %+v in %+v", m, c.Mounts)
		}
		if st, err := os.Lstat(filepath.Join(layer, "upper")); err != nil || !st.IsDir() {
			t.Errorf("the layer of %s: %v", p, err)
		}
		if !slices.Contains(c.ReadWrite, p) {
			t.Errorf("%s is not writable in the box (Landlock): %v", p, c.ReadWrite)
		}
	}
	// The folders above each one, up to the top, pinned before the overlays (review 13, F3).
	var pins []plan.Mount
	for _, rel := range []string{"a", "a/b", "a/b/c", "a/b/c/d", "a/b/c/d/e", "app", "crates", "crates/x", "packages", "packages/web", "packages/web/ui", "py"} {
		d := filepath.Join(ws, rel)
		pins = append(pins, plan.Mount{Kind: plan.MountBind, Source: d, Target: d, Beneath: ws})
	}
	if len(c.Mounts) != len(pins)+len(want) || !reflect.DeepEqual(c.Mounts[:len(pins)], pins) {
		t.Errorf("mounts %+v, want the pins %+v, then %d overlays", c.Mounts, pins, len(want))
	}
	placeholders := []string{filepath.Join(ws, "app", "node_modules"), filepath.Join(ws, "crates", "x", "target"), filepath.Join(ws, "a", "b", "c", "d", "e", ".venv"),
		filepath.Join(ws, "packages", "web", "ui", "node_modules")}
	for _, p := range placeholders {
		if st, err := os.Lstat(p); err != nil || !st.IsDir() {
			t.Errorf("no placeholder at %s while the launch runs: %v", p, err)
		}
	}
	if _, err := d.integrity.reg.Release("L1"); err != nil {
		t.Fatal(err)
	}
	for _, p := range placeholders {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("the placeholder %s is still there after the launch: %v", p, err)
		}
	}
	for _, p := range []string{".venv/bin", "node_modules/p/package.json", "py/venv/pyvenv.cfg"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("the host's %s: %v", p, err)
		}
	}
}

// TestDependencyFoldersBound: past depFoldersMax, the folders the host has come first (the
// box would write them in place), the shallowest first, and the launch says how many are left
// (its notice): a monorepo with a package.json in each of 70 packages and no node_modules
// (hoisted) does not push the host's own out.
func TestDependencyFoldersBound(t *testing.T) {
	ws := t.TempDir()
	for i := range depFoldersMax + 6 {
		p := filepath.Join(ws, "packages", fmt.Sprintf("p%02d", i))
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "package.json"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	host := filepath.Join(ws, "packages", "p69", "node_modules")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	got, past, _ := dependencyFolders(ws, ws)
	if left := len(past); len(got) != depFoldersMax || left != 6 || !slices.Contains(got, host) {
		t.Fatalf("%d folders, %d left, the host's %s among them: %v; want %d, 6 left, it in", len(got), len(past), host, slices.Contains(got, host), depFoldersMax)
	}
	state := t.TempDir()
	d := &Daemon{stateDir: state, integrity: newIntegrityBroker(integrityDeps{StateDir: state}), log: slog.New(slog.DiscardHandler)}
	var c plan.Contributions
	notice, err := d.dependencyOverlays("L1", ws, ws, plan.WorkspaceFacts{}, &c)
	overlays := 0
	for _, m := range c.Mounts {
		if m.Kind == plan.MountOverlay {
			overlays++
		}
	}
	if err != nil || !strings.Contains(notice, "6 of the workspace's dependency folders") || overlays != depFoldersMax {
		t.Errorf("notice %q, %d overlays (%v)", notice, overlays, err)
	}
	d.integrity.reg.Release("L1")
}

// TestDependencyFoldersRemembered: a box makes thousands of empty folders at the workspace's
// top (git status shows none), so that the next launch's bounded search ends before the
// host's frontend/node_modules. The folders earlier launches found stay the box's own, and
// the launch says that its search was cut short. Before, the next box got no overlay there
// and wrote the host's folder, which the host's npm test ran (review 13, F2).
func TestDependencyFoldersRemembered(t *testing.T) {
	ws := t.TempDir()
	host := filepath.Join(ws, "frontend", "node_modules")
	if err := os.MkdirAll(filepath.Join(host, "dep"), 0o755); err != nil { // the host's install
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "frontend", "package.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	d := &Daemon{stateDir: state, integrity: newIntegrityBroker(integrityDeps{StateDir: state}), log: slog.New(slog.DiscardHandler)}
	overlaid := func(id string) (bool, string) {
		t.Helper()
		var c plan.Contributions
		notice, err := d.dependencyOverlays(id, ws, ws, plan.WorkspaceFacts{}, &c)
		if err != nil {
			t.Fatal(err)
		}
		defer d.integrity.reg.Release(id)
		return slices.ContainsFunc(c.Mounts, func(m plan.Mount) bool { return m.Kind == plan.MountOverlay && m.Target == host }), notice
	}
	if ok, notice := overlaid("L1"); !ok || notice != "" {
		t.Fatalf("first launch: overlay of %s %v, notice %q", host, ok, notice)
	}
	for i := range depProjectDirs + 100 {
		if err := os.Mkdir(filepath.Join(ws, fmt.Sprintf("0%05d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, _, cut := dependencyFolders(ws, ws); slices.Contains(got, host) || !cut {
		t.Fatalf("the search still reaches %s past %d folders (cut %v): the test shows nothing", host, depProjectDirs, cut)
	}
	ok, notice := overlaid("L2")
	if !ok {
		t.Errorf("after the decoys, %s is not the box's own", host)
	}
	if !strings.Contains(notice, "more folders than") {
		t.Errorf("the launch does not say its search was cut short: %q", notice)
	}
}

// TestDependencyFoldersListWrittenOnChange: a launch that finds the folders the list already
// holds leaves the list's file as it is (its write is two fsyncs on the launch's path); one that
// finds another folder writes the list again, with it.
func TestDependencyFoldersListWrittenOnChange(t *testing.T) {
	ws := t.TempDir()
	for _, dir := range []string{"a/node_modules", "b"} {
		if err := os.MkdirAll(filepath.Join(ws, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The host's folders hold its install: only those are remembered.
	for _, f := range []string{"a/package.json", "b/package.json", "a/node_modules/.package-lock.json"} {
		if err := os.WriteFile(filepath.Join(ws, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	d := &Daemon{stateDir: state, integrity: newIntegrityBroker(integrityDeps{StateDir: state}), log: slog.New(slog.DiscardHandler)}
	known := filepath.Join(state, knownDepFoldersDir, filepath.Base(boxCache(state, ws)))
	launch := func(id string) (fi os.FileInfo, list string) {
		t.Helper()
		var c plan.Contributions
		if _, err := d.dependencyOverlays(id, ws, ws, plan.WorkspaceFacts{}, &c); err != nil {
			t.Fatal(err)
		}
		d.integrity.reg.Release(id)
		fi, err := os.Stat(known)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(known)
		if err != nil {
			t.Fatal(err)
		}
		return fi, string(b)
	}
	fi1, list1 := launch("L1")
	if list1 != "a/node_modules\n" {
		t.Fatalf("list after the first launch %q, want a/node_modules", list1)
	}
	if fi2, list2 := launch("L2"); !os.SameFile(fi1, fi2) || list2 != list1 {
		t.Errorf("an unchanged launch wrote the list again (another file: %v; %q → %q)", !os.SameFile(fi1, fi2), list1, list2)
	}
	if err := os.Mkdir(filepath.Join(ws, "b", "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "b/node_modules/.package-lock.json"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if fi3, list3 := launch("L3"); os.SameFile(fi1, fi3) || list3 != "a/node_modules\nb/node_modules\n" {
		t.Errorf("after another folder: the same file %v, list %q; want it written again with b/node_modules", os.SameFile(fi1, fi3), list3)
	}
}

// TestDependencyFoldersHostFirst: a box leaves 70 empty node_modules (git status shows none,
// and the check at exit leaves an empty folder), more than depFoldersMax; the host's
// web/node_modules, which holds its install, is the box's own still, and the next launch does
// not remember the empty ones (whose places would be the host's). Where the host's own folders
// are past the bound, the launch's notice names them. Before (review 14, F4), the decoys sorted
// first: web/node_modules was written in place, and the notice only counted.
func TestDependencyFoldersHostFirst(t *testing.T) {
	ws := t.TempDir()
	mk := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(ws, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 70 {
		mk(fmt.Sprintf("a%02d/node_modules", i))
	}
	mk("web/node_modules/.bin")
	web := filepath.Join(ws, "web", "node_modules")
	state := t.TempDir()
	d := &Daemon{stateDir: state, integrity: newIntegrityBroker(integrityDeps{StateDir: state}), log: slog.New(slog.DiscardHandler)}
	launch := func(id string) ([]string, string) {
		t.Helper()
		var c plan.Contributions
		notice, err := d.dependencyOverlays(id, ws, ws, plan.WorkspaceFacts{}, &c)
		if err != nil {
			t.Fatal(err)
		}
		d.integrity.reg.Release(id)
		var got []string
		for _, m := range c.Mounts {
			if m.Kind == plan.MountOverlay {
				got = append(got, m.Target)
			}
		}
		return got, notice
	}
	got, notice := launch("L1")
	if !slices.Contains(got, web) {
		t.Errorf("the host's %s is not the box's own among %d overlays", web, len(got))
	}
	if strings.Contains(notice, "web/node_modules") {
		t.Errorf("the notice names the host's folder, which is the box's own: %q", notice)
	}
	known, _ := os.ReadFile(filepath.Join(state, knownDepFoldersDir, filepath.Base(boxCache(state, ws))))
	if string(known) != "web/node_modules\n" {
		t.Errorf("remembered %q, want the host's folder alone", known)
	}
	// The host's own folders past the bound are named.
	for i := range depFoldersMax + 2 {
		mk(fmt.Sprintf("p%02d/node_modules/dep", i))
	}
	_, notice = launch("L2")
	for _, want := range []string{"among them the host's own", "p64/node_modules", "p65/node_modules"} {
		if !strings.Contains(notice, want) {
			t.Errorf("the notice %q does not say %q", notice, want)
		}
	}
}

// TestDependencyFoldersHiddenVenvs: the host's virtualenvs in hidden folders — direnv's
// .direnv/python-3 (layout python), tox's .tox/py3, nox's .nox/tests, and one in a hidden
// folder of a project below the top — are the box's own; a .git is not looked into. Before
// (review 14, F7), the search did not enter hidden folders and the box wrote them in place.
func TestDependencyFoldersHiddenVenvs(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	ws := t.TempDir()
	var want []string
	for _, v := range []string{".direnv/python-3", ".tox/py3", ".nox/tests", "svc/.tox/lint"} {
		if out, err := exec.Command(py, "-m", "venv", "--without-pip", filepath.Join(ws, v)).CombinedOutput(); err != nil {
			t.Fatalf("python3 -m venv %s: %v\n%s", v, err, out)
		}
		want = append(want, filepath.Join(ws, v))
	}
	// Not one: a virtualenv's marker in a git directory.
	if err := os.MkdirAll(filepath.Join(ws, ".git", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "x", integrity.VenvMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, _ := dependencyFolders(ws, ws)
	slices.Sort(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dependencyFolders = %v, want %v", got, want)
	}
}

// BenchmarkDependencyFolders: the launch's search for dependency folders over this
// repository (its top, and four levels below: docs/benchmarks.md).
func BenchmarkDependencyFolders(b *testing.B) {
	ws, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		dependencyFolders(ws, filepath.Join(ws, "internal", "daemon"))
	}
}
