package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPathDepFolderExemptsOverlaidOnly (review 18, F2): the launch's PATH rule passes over an
// entry only where it lies in one of the dependency folders the launch overlays, as a real
// folder: before, any entry with a component named node_modules or .venv (or beneath a
// pyvenv.cfg) was passed over, and the box made node_modules a symlink to a folder of its own
// and wrote git there.
func TestPathDepFolderExemptsOverlaidOnly(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mk := func(rel string) {
		if err := os.MkdirAll(filepath.Join(ws, rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk("app/node_modules/.bin") // beside a package.json: overlaid
	if err := os.WriteFile(filepath.Join(ws, "app", "package.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	mk("tools/.bin")
	if err := os.Symlink("tools", filepath.Join(ws, "node_modules")); err != nil { // a symlink: not overlaid
		t.Fatal(err)
	}
	mk("env/bin") // a virtualenv by its marker
	if err := os.WriteFile(filepath.Join(ws, "env", "pyvenv.cfg"), []byte("home = /usr/bin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mk("late/node_modules/.bin") // found, then made a symlink before the rule
	if err := os.WriteFile(filepath.Join(ws, "late", "package.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	d := &Daemon{stateDir: state, integrity: newIntegrityBroker(integrityDeps{StateDir: state})}
	found := d.findDepFolders(ws, ws)
	if !slices.Contains(found.folders, filepath.Join(ws, "late", "node_modules")) {
		t.Fatalf("findDepFolders = %v, want late/node_modules among them", found.folders)
	}
	if err := os.Rename(filepath.Join(ws, "late", "node_modules"), filepath.Join(ws, "late", "nm")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nm", filepath.Join(ws, "late", "node_modules")); err != nil {
		t.Fatal(err)
	}
	asked := 0
	deps := func() launchDepFolders { asked++; return found }
	for _, c := range []struct {
		entry  string
		exempt bool
	}{
		{"app/node_modules/.bin", true},
		{"env/bin", true},
		{"node_modules/.bin", false},      // the symlink to tools
		{".venv/bin", false},              // no such folder: no overlay
		{"x/node_modules/.bin", false},    // a name, no folder
		{"late/node_modules/.bin", false}, // a symlink since it was found
		{"tools/.bin", false},
	} {
		p := filepath.Join(ws, c.entry)
		got := outsideDepFolders(ws, []string{p, "/usr/bin"}, deps)
		if exempt := !slices.Contains(got, p); exempt != c.exempt {
			t.Errorf("PATH entry %s: exempt %v, want %v (the launch's dependency folders: %v)", c.entry, exempt, c.exempt, found.folders)
		}
		if !slices.Contains(got, "/usr/bin") {
			t.Errorf("PATH entry /usr/bin left out: %v", got)
		}
	}
	if outsideDepFolders(ws, []string{"/usr/bin", "bin"}, deps); asked != 7 {
		t.Errorf("the dependency folders were asked for %d times, want once per rule with an entry in the workspace (7)", asked)
	}
}
