package integrity

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// tick waits past ctimeLag, as there is time between the host's last write and a launch's
// snapshot, and between the snapshot and the box's first write: the check takes a ctime within
// ctimeLag of the snapshot for one written since (State.changedIn). A separation in time, not
// a measurement.
func tick() { time.Sleep(2 * ctimeLag) }

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
	tick()
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
// python -m venv over it keeps its .pth); a new *.pth file in a site-packages that is in no
// virtualenv is moved aside alone, and the host's virtualenv (past the launch's bound) with a
// new one in it is moved aside whole (TestDepFoldersWrittenInPlace); and an empty dependency
// folder of the snapshot that the box filled in place (past the bound) is moved aside (review
// 14, F4). A file outside site-packages stays; nothing moves before the exit.
func TestSitePackagesAtExit(t *testing.T) {
	ws := newWS(t)
	hostPth := filepath.Join(ws, "hostenv", "lib", "python3.11", "site-packages", "host.pth")
	mustWrite(t, filepath.Join(ws, "hostenv", VenvMarker), "home = /usr/bin\n")
	mustWrite(t, hostPth, "/opt/x\n")
	decoy := filepath.Join(ws, "a00", "node_modules")
	if err := os.MkdirAll(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	tick()
	s := Snapshot(resolveWS(t, ws), Limits{})
	tick()
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
	want := map[string]Kind{venv: Created, filepath.Join(ws, "hostenv"): Modified, topPth: Created, decoy: Modified}
	if !maps.Equal(moved, want) {
		t.Errorf("moved %v, want %v", moved, want)
	}
	for p := range want {
		if err := keptAside(p); err != nil {
			t.Errorf("%s was not kept aside: %v", p, err)
		}
	}
	aside := AsideDirPath(filepath.Join(ws, "hostenv"), 1)
	for _, p := range []string{strings.Replace(hostPth, filepath.Join(ws, "hostenv"), aside, 1), strings.Replace(newPth, filepath.Join(ws, "hostenv"), aside, 1), notSite} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, tr := range s.VerifyExit() {
		t.Errorf("a second check at exit: %+v", tr)
	}
}

// TestDepFoldersWrittenInPlace: a dependency folder that was there at launch and is not the
// box's own (past the launch's bounds: the box writes it in place) is moved aside at exit when
// anything in it was written, removed or changed since the snapshot — a module appended to in
// place (same inode: no new folder to see), a file removed, a mode changed, a .pth rewritten in
// a site-packages that is in no virtualenv, a conda environment's activate.d script (found by
// its layout) — whoever did it (the host's own pip too: the check
// cannot tell). In the box's own folders (Own) the host's writes stay: the box never writes
// them. A folder nobody wrote stays; past the
// bound of entries looked at, a folder is reported as not checked. Before, only folders that
// appeared, or were empty at launch, were moved: the host's npm test ran what the box appended.
func TestDepFoldersWrittenInPlace(t *testing.T) {
	ws := newWS(t)
	appended := filepath.Join(ws, "a", "node_modules")
	mustWrite(t, filepath.Join(appended, "greet", "index.js"), "console.log('host')\n")
	removed := filepath.Join(ws, "b", ".venv")
	mustWrite(t, filepath.Join(removed, VenvMarker), "home = /usr/bin\n")
	mustWrite(t, filepath.Join(removed, "lib", "python3.11", "site-packages", "shadow.py"), "x = 1\n")
	chmodded := filepath.Join(ws, "c", "node_modules")
	mustWrite(t, filepath.Join(chmodded, ".bin", "tool"), "#!/bin/sh\n")
	untouched := filepath.Join(ws, "d", "node_modules")
	mustWrite(t, filepath.Join(untouched, "x", "index.js"), "host\n")
	lonePth := filepath.Join(ws, "e", "site-packages", "lone.pth")
	mustWrite(t, lonePth, "/opt/x\n")
	own := filepath.Join(ws, "f", "node_modules") // the box's own: the host installs there meanwhile
	mustWrite(t, filepath.Join(own, "x", "index.js"), "host\n")
	ownVenv := filepath.Join(ws, "g", ".venv") // the box's own: the host's pip install -e . meanwhile
	mustWrite(t, filepath.Join(ownVenv, VenvMarker), "home = /usr/bin\n")
	mustWrite(t, filepath.Join(ownVenv, "lib", "python3.11", "site-packages", "host.pth"), "/opt/x\n")
	conda := filepath.Join(ws, "m", "env") // conda create -p ./env: no pyvenv.cfg, a virtualenv's layout
	mustWrite(t, filepath.Join(conda, "conda-meta", "history"), "==> 2026-12-02 <==\n")
	mustWrite(t, filepath.Join(conda, "etc", "conda", "activate.d", "x.sh"), "export X=1\n")
	mustWrite(t, filepath.Join(conda, "lib", "python3.11", "site-packages", "x.py"), "x = 1\n")
	ownTarget := filepath.Join(ws, "k", "target") // the box's own
	mustWrite(t, filepath.Join(ws, "k", "Cargo.toml"), "[package]\n")
	mustWrite(t, filepath.Join(ownTarget, "debug", "old"), "host\n")
	tick()
	s := Snapshot(resolveWS(t, ws), Limits{})
	s.Own = []string{own, ownVenv, ownTarget}
	tick()

	appendTo := func(p, line string) {
		t.Helper()
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(line)
		f.Close()
	}
	appendTo(filepath.Join(appended, "greet", "index.js"), "console.log('BOX')\n")
	os.Remove(filepath.Join(removed, "lib", "python3.11", "site-packages", "shadow.py"))
	os.Chmod(filepath.Join(chmodded, ".bin", "tool"), 0o755)
	appendTo(lonePth, "import os\n")
	appendTo(filepath.Join(conda, "etc", "conda", "activate.d", "x.sh"), "echo BOX\n")
	mustWrite(t, filepath.Join(own, "y", "index.js"), "host, later\n")
	appendTo(filepath.Join(own, "x", "index.js"), "host, later\n")
	mustWrite(t, filepath.Join(ownVenv, "lib", "python3.11", "site-packages", "__editable__.host.pth"), "/work/src\n")
	// The host builds in its own target/ meanwhile: cargo links each binary twice.
	mustWrite(t, filepath.Join(ownTarget, "debug", "deps", "app-1234"), "host binary\n")
	if err := os.Link(filepath.Join(ownTarget, "debug", "deps", "app-1234"), filepath.Join(ownTarget, "debug", "app")); err != nil {
		t.Fatal(err)
	}

	for _, tr := range s.VerifyExec() {
		if strings.Contains(tr.Detail, "moved aside") {
			t.Errorf("a check before the exit moved %s: %+v", tr.Path, tr)
		}
	}
	moved := map[string]Kind{}
	for _, tr := range s.VerifyExit() {
		if !strings.Contains(tr.Detail, "moved aside to") || !tr.Alert || !strings.Contains(tr.Detail, "cannot tell") {
			t.Errorf("not moved aside with an alert that says who may have written it: %+v", tr)
			continue
		}
		moved[tr.Path] = tr.Kind
	}
	want := map[string]Kind{appended: Modified, removed: Modified, chmodded: Modified, lonePth: Modified, conda: Modified}
	if !maps.Equal(moved, want) {
		t.Errorf("moved %v, want %v", moved, want)
	}
	for p := range want {
		if err := keptAside(p); err != nil {
			t.Errorf("%s was not kept aside: %v", p, err)
		}
	}
	for _, p := range []string{untouched, filepath.Join(own, "y"), filepath.Join(ownVenv, "lib", "python3.11", "site-packages", "__editable__.host.pth"), filepath.Join(ownTarget, "debug", "app")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s, which no box could have written, was moved: %v", p, err)
		}
	}
	for _, tr := range s.VerifyExit() {
		t.Errorf("a second check at exit: %+v", tr)
	}

	// Past the bound of entries looked at, the folder is reported, not moved.
	big := filepath.Join(ws, "i", "node_modules")
	for i := range 5 {
		mustWrite(t, filepath.Join(big, "p"+string(rune('0'+i)), "index.js"), "host\n")
	}
	tick()
	s = Snapshot(resolveWS(t, ws), Limits{DepEntries: 3})
	tick()
	appendTo(filepath.Join(big, "p4", "index.js"), "BOX\n")
	var notChecked bool
	for _, tr := range s.VerifyExit() {
		if strings.Contains(tr.Detail, "moved aside") {
			t.Errorf("moved past the bound: %+v", tr)
		}
		if tr.Path == big && tr.Alert && strings.Contains(tr.Detail, "not checked") {
			notChecked = true
		}
	}
	if !notChecked {
		t.Errorf("%s, past the bound of entries, was not reported as not checked", big)
	}
}

// BenchmarkDepFolderWalk: what the check at exit spends on a dependency folder there at launch
// that is not the box's own, untouched (the whole folder is walked): 1,000 packages of 20 files
// each, about the size of a middling project's node_modules.
func BenchmarkDepFolderWalk(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "node_modules")
	for p := range 1000 {
		pkg := filepath.Join(dir, fmt.Sprintf("p%d", p), "lib")
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 20 {
			if err := os.WriteFile(filepath.Join(pkg, fmt.Sprintf("f%d.js", f)), []byte("x\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	since := time.Now().Add(time.Hour).UnixNano()
	for b.Loop() {
		budget := 1000000
		if found, err := changedWithin(dir, since, &budget); found != "" || err != nil {
			b.Fatal(found, err)
		}
	}
}
