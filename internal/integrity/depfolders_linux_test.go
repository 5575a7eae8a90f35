package integrity

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDepFoldersMovedAsideAtExit: a dependency folder that appears while a box runs — a
// project the box made and installed, a virtualenv of any name, a cargo target/ — or that
// replaces one the host removed meanwhile (which detached the box's overlay there) is moved
// aside by the check at exit, not before (the box's own npm test needs it), so that the host's
// npm test, activate and cargo run do not run what it holds. The host's folders left as they
// were, an empty one (the launch's own placeholder), a target/ with no Cargo.toml and what lies
// inside a moved folder stay or go with it. Without VerifyExit's move, they stayed.
func TestDepFoldersMovedAsideAtExit(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, "package.json"), "{}\n")
	mustWrite(t, filepath.Join(ws, "node_modules", "dep", "index.js"), "host\n")
	mustWrite(t, filepath.Join(ws, "py", "env", VenvMarker), "home = /usr/bin\n") // a host virtualenv named env/
	mustWrite(t, filepath.Join(ws, "web", "node_modules", "dep", "index.js"), "host\n")
	s := Snapshot(resolveWS(t, ws), Limits{})
	want := []string{filepath.Join(ws, "node_modules"), filepath.Join(ws, "py", "env"), filepath.Join(ws, "web", "node_modules")}
	var got []string
	for p := range s.Deps {
		got = append(got, p)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("dependency folders at the snapshot: %v, want %v", got, want)
	}

	// What the box does.
	newMods := filepath.Join(ws, "new", "app", "node_modules") // a project the box made
	mustWrite(t, filepath.Join(newMods, ".bin", "node"), "#!/bin/sh\necho box\n")
	mustWrite(t, filepath.Join(newMods, "dep", "node_modules", "x", "index.js"), "box\n")
	mustWrite(t, filepath.Join(newMods, "dep", ".git", "hooks", "pre-commit"), "#!/bin/sh\n") // goes with its folder
	venv := filepath.Join(ws, "tools", "venv")
	mustWrite(t, filepath.Join(venv, VenvMarker), "home = /usr/bin\n")
	mustWrite(t, filepath.Join(venv, "bin", "activate"), "echo box\n")
	hidden := filepath.Join(ws, ".env") // a hidden virtualenv
	mustWrite(t, filepath.Join(hidden, VenvMarker), "home = /usr/bin\n")
	target := filepath.Join(ws, "crates", "c", "target")
	mustWrite(t, filepath.Join(ws, "crates", "c", "Cargo.toml"), "[package]\n")
	mustWrite(t, filepath.Join(target, "debug", "c"), "box binary\n")
	notCargo := filepath.Join(ws, "other", "target")
	mustWrite(t, filepath.Join(notCargo, "x"), "kept\n")
	placeholder := filepath.Join(ws, "empty", "node_modules")
	if err := os.MkdirAll(placeholder, 0o755); err != nil {
		t.Fatal(err)
	}
	// The host removed web/node_modules while the box ran; the box's npm made it again.
	replaced := filepath.Join(ws, "web", "node_modules")
	if err := os.RemoveAll(replaced); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(replaced, ".bin", "node"), "#!/bin/sh\necho box\n")

	// While the box runs, nothing is moved: its own tools use them.
	for _, tr := range s.VerifyExec() {
		if strings.Contains(tr.Detail, "dependency folder") {
			t.Errorf("a check before the exit moved a dependency folder: %+v", tr)
		}
	}
	moved := map[string]Kind{}
	for _, tr := range s.VerifyExit() {
		if strings.Contains(tr.Detail, "dependency folder") {
			if !strings.Contains(tr.Detail, "moved aside to") || !tr.Alert {
				t.Errorf("not moved aside: %+v", tr)
			}
			moved[tr.Path] = tr.Kind
		}
	}
	wantMoved := map[string]Kind{newMods: Created, venv: Created, hidden: Created, target: Created, replaced: Replaced}
	if len(moved) != len(wantMoved) {
		t.Errorf("moved %v, want %v", moved, wantMoved)
	}
	for p, k := range wantMoved {
		if moved[p] != k {
			t.Errorf("%s: %q, want %q moved aside", p, moved[p], k)
		}
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
		if err := keptAside(p); err != nil {
			t.Errorf("%s was not kept aside: %v", p, err)
		}
	}
	for _, p := range []string{filepath.Join(ws, "node_modules", "dep", "index.js"), filepath.Join(ws, "py", "env", VenvMarker), filepath.Join(notCargo, "x"), placeholder} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	// A second check at exit (a re-adopted launch) moves nothing more.
	for _, tr := range s.VerifyExit() {
		if strings.Contains(tr.Detail, "dependency folder") {
			t.Errorf("moved again: %+v", tr)
		}
	}
	// A state saved before Deps was kept moves nothing.
	mustWrite(t, filepath.Join(ws, "late", "node_modules", "x"), "box\n")
	s.Deps = nil
	for _, tr := range s.VerifyExit() {
		if strings.Contains(tr.Detail, "dependency folder") {
			t.Errorf("an old state moved a dependency folder: %+v", tr)
		}
	}
}

// TestSitePackagesAtExit: at exit, a new folder at a virtualenv's layout
// (TOP/lib/python3.X/site-packages) is moved aside whole, pyvenv.cfg or not (review 14, F6:
// python -m venv over it keeps its .pth); a new *.pth file in any other site-packages (the
// host's virtualenv, past the launch's bound) is moved aside alone; and an empty dependency
// folder of the snapshot that the box filled in place (past the bound) is moved aside (review
// 14, F4). The host's virtualenv and its own .pth stay; nothing moves before the exit.
func TestSitePackagesAtExit(t *testing.T) {
	ws := newWS(t)
	hostPth := filepath.Join(ws, "hostenv", "lib", "python3.11", "site-packages", "host.pth")
	mustWrite(t, filepath.Join(ws, "hostenv", VenvMarker), "home = /usr/bin\n")
	mustWrite(t, hostPth, "/opt/x\n")
	decoy := filepath.Join(ws, "a00", "node_modules")
	if err := os.MkdirAll(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	s := Snapshot(resolveWS(t, ws), Limits{})
	if d, ok := s.Deps[decoy]; !ok || !d.Empty {
		t.Fatalf("the snapshot's %s: %+v (recorded %v), want an empty one", decoy, d, ok)
	}

	// What the box does.
	venv := filepath.Join(ws, "venv") // no pyvenv.cfg
	mustWrite(t, filepath.Join(venv, "lib", "python3.12", "site-packages", "zz.pth"), "import os\n")
	newPth := filepath.Join(ws, "hostenv", "lib", "python3.11", "site-packages", "zz.pth")
	mustWrite(t, newPth, "import os\n")
	topPth := filepath.Join(ws, "lib", "python3.11", "site-packages", "zz.pth") // its top is the workspace's
	mustWrite(t, topPth, "import os\n")
	notSite := filepath.Join(ws, "other", "lib", "python3.11", "x.pth")
	mustWrite(t, notSite, "import os\n")
	mustWrite(t, filepath.Join(decoy, ".bin", "hello"), "#!/bin/sh\necho box\n")

	for _, tr := range s.VerifyExec() {
		if strings.Contains(tr.Detail, "moved aside") {
			t.Errorf("a check before the exit moved %s: %+v", tr.Path, tr)
		}
	}
	moved := map[string]Kind{}
	for _, tr := range s.VerifyExit() {
		if !strings.Contains(tr.Detail, "moved aside to") || !tr.Alert {
			t.Errorf("not moved aside with an alert: %+v", tr)
			continue
		}
		moved[tr.Path] = tr.Kind
	}
	want := map[string]Kind{venv: Created, newPth: Created, topPth: Created, decoy: Modified}
	if !maps.Equal(moved, want) {
		t.Errorf("moved %v, want %v", moved, want)
	}
	for p := range want {
		if err := keptAside(p); err != nil {
			t.Errorf("%s was not kept aside: %v", p, err)
		}
	}
	for _, p := range []string{hostPth, filepath.Join(ws, "hostenv", VenvMarker), notSite} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, tr := range s.VerifyExit() {
		t.Errorf("a second check at exit: %+v", tr)
	}
}
