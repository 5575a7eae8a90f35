package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/plan"
)

// TestBytecodeMirror: the system's bytecode is mirrored at PYTHONPYCACHEPREFIX's layout, as
// symlinks to each __pycache__ file (not to other files, not through a symlinked folder); the
// same libraries give the same generation, made once; a library that changed gives a new one
// and the old goes; and a box cache's prefix is an overlay of the mirror under the
// workspace's layer, at the prefix's path.
func TestBytecodeMirror(t *testing.T) {
	state, libs, other := t.TempDir(), t.TempDir(), t.TempDir()
	lib := filepath.Join(libs, "python3.11")
	for p, body := range map[string]string{
		"python3.11/__pycache__/os.cpython-311.pyc":                 "os",
		"python3.11/json/__pycache__/decoder.cpython-311.pyc":       "decoder",
		"python3.11/json/__pycache__/notes.txt":                     "not bytecode",
		"python3.11/json/__pycache__/decoder.cpython-311.opt-1.pyc": "python -O's",
		"python3.11/json/stray.cpython-311.pyc":                     "not in a __pycache__",
		"python3.11/json/decoder.py":                                "source",
	} {
		if err := os.MkdirAll(filepath.Join(libs, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(libs, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(other, "__pycache__"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other, "__pycache__", "x.cpython-311.pyc"), nil, 0o644)
	if err := os.Symlink(other, filepath.Join(lib, "linked")); err != nil {
		t.Fatal(err)
	}

	dir, err := bytecodeMirror(context.Background(), state, []string{lib})
	if err != nil || dir == "" {
		t.Fatalf("bytecodeMirror: %q, %v", dir, err)
	}
	var got []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type()&os.ModeSymlink != 0 {
			to, _ := os.Readlink(p)
			rel, _ := filepath.Rel(dir, p)
			got = append(got, rel+" -> "+to)
		}
		return nil
	})
	want := []string{
		filepath.Join(lib[1:], "json", "decoder.cpython-311.pyc") + " -> " + filepath.Join(lib, "json", "__pycache__", "decoder.cpython-311.pyc"),
		filepath.Join(lib[1:], "os.cpython-311.pyc") + " -> " + filepath.Join(lib, "__pycache__", "os.cpython-311.pyc"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("the mirror holds\n%v\nwant\n%v", got, want)
	}
	if again, err := bytecodeMirror(context.Background(), state, []string{lib}); err != nil || again != dir {
		t.Errorf("the same libraries again: %q, %v; want %q", again, err, dir)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(lib, later, later); err != nil {
		t.Fatal(err)
	}
	next, err := bytecodeMirror(context.Background(), state, []string{lib})
	if err != nil || next == dir || next == "" {
		t.Fatalf("after the library changed: %q, %v; want a new generation", next, err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the old generation stays: %v", err)
	}
	// Another set of libraries (a launch that selects a toolchain Python too) has a mirror of
	// its own beside this one; past maxBytecodeSets sets, the oldest made goes.
	other2 := filepath.Join(other, "lib", "python3.12")
	if err := os.MkdirAll(filepath.Join(other2, "__pycache__"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other2, "__pycache__", "os.cpython-312.pyc"), nil, 0o644)
	both, err := bytecodeMirror(context.Background(), state, []string{lib, other2})
	if err != nil || both == "" || both == next {
		t.Fatalf("a second set of libraries: %q, %v; want a mirror of its own", both, err)
	}
	if !isDir(next) {
		t.Errorf("the first set's mirror %s went when a second set's was made", next)
	}
	if _, err := os.Lstat(filepath.Join(both, other2[1:], "os.cpython-312.pyc")); err != nil {
		t.Errorf("the second set's mirror lacks its own library's bytecode: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(both, lib[1:], "os.cpython-311.pyc")); err != nil {
		t.Errorf("the second set's mirror lacks the first library's bytecode: %v", err)
	}
	var sets []string
	for i := range maxBytecodeSets + 2 {
		extra := filepath.Join(other, "lib", fmt.Sprintf("python3.%d", 20+i))
		if err := os.MkdirAll(filepath.Join(extra, "__pycache__"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(extra, "__pycache__", "os.pyc"), nil, 0o644)
		m, err := bytecodeMirror(context.Background(), state, []string{lib, extra})
		if err != nil || m == "" {
			t.Fatal(m, err)
		}
		sets = append(sets, m)
		time.Sleep(10 * time.Millisecond) // the sets are told apart by when they were made
	}
	if es, _ := os.ReadDir(filepath.Dir(next)); len(es) != maxBytecodeSets {
		t.Errorf("%d mirrors kept, want at most %d", len(es), maxBytecodeSets)
	}
	if isDir(next) || !isDir(sets[len(sets)-1]) {
		t.Errorf("past %d sets the oldest should go (%s: %v), the newest stay (%v)", maxBytecodeSets, next, isDir(next), isDir(sets[len(sets)-1]))
	}
	next = sets[len(sets)-1]

	if none, err := bytecodeMirror(context.Background(), state, []string{t.TempDir()}); none != "" || err != nil {
		t.Errorf("libraries without bytecode: %q, %v; want none", none, err)
	}

	cache := t.TempDir()
	prefix := filepath.Join(cache, "python", "pycache")
	var c plan.Contributions
	if err := cacheOverlays(cache, "launch1", []packageCache{{name: "python", dir: prefix, lower: next}}, nil, plan.WorkspaceFacts{}, nil, &c); err != nil {
		t.Fatal(err)
	}
	wantM := plan.Mount{Kind: plan.MountOverlay, Source: next, Upper: filepath.Join(cache, "python", "upper"),
		Work: filepath.Join(cache, "work", "launch1", "python"), Target: prefix, Beneath: cache, Optional: true}
	if len(c.Mounts) != 1 || c.Mounts[0] != wantM {
		t.Errorf("the prefix's mounts: %+v, want %+v", c.Mounts, wantM)
	}
	if !isPlainDir(prefix) {
		t.Errorf("the prefix %s is not made as the overlay's mount point", prefix)
	}
}

// TestToolchainPythonLibs: the toolchain Pythons whose bytecode is mirrored are the prefixes on
// PATH and, in a pyenv root, the versions pyenv selects: $PYENV_VERSION, else the nearest
// .python-version at or above the start folder, else the root's version file; never a name
// that leaves versions/, a version reached through a symlink, one inside or around the
// workspace, nor a .python-version that is a symlink (a FIFO: TestPyenvVersionFIFO).
func TestToolchainPythonLibs(t *testing.T) {
	home := t.TempDir()
	pyenv := filepath.Join(home, ".pyenv")
	for _, v := range []string{"3.11.7", "3.12.1", "3.13.0"} {
		if err := os.MkdirAll(filepath.Join(pyenv, "versions", v, "lib", "python"+v[:4]), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lib := func(v string) string { return filepath.Join(pyenv, "versions", v, "lib", "python"+v[:4]) }
	os.Symlink(filepath.Join(pyenv, "versions", "3.12.1"), filepath.Join(pyenv, "versions", "linked"))
	os.WriteFile(filepath.Join(pyenv, "version"), []byte("3.11.7\n"), 0o644)
	ws := filepath.Join(home, "proj")
	sub := filepath.Join(ws, "pkg", "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(home, "opt", "py")
	if err := os.MkdirAll(filepath.Join(prefix, "lib", "python3.10"), 0o755); err != nil {
		t.Fatal(err)
	}
	roots := []string{pyenv, prefix}
	check := func(name, cwd string, env []string, want ...string) {
		t.Helper()
		got := toolchainPythonLibs(roots, ws, cwd, env)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	check("the global version", sub, nil, lib("3.11.7"), filepath.Join(prefix, "lib", "python3.10"))
	roots = []string{pyenv}
	os.WriteFile(filepath.Join(ws, ".python-version"), []byte("# the project's\n3.13.0 3.12.1\n../../../opt/py\nlinked\nsystem\n"), 0o644)
	check("the workspace's .python-version, from a subfolder", sub, nil, lib("3.12.1"), lib("3.13.0"))
	check("PYENV_VERSION first", sub, []string{"PYENV_VERSION=3.12.1:nope:.."}, lib("3.12.1"))
	os.Remove(filepath.Join(ws, ".python-version"))
	os.Symlink(filepath.Join(pyenv, "version"), filepath.Join(sub, ".python-version"))
	check("a symlinked .python-version is not read", sub, nil)
	os.Remove(filepath.Join(sub, ".python-version"))
	ws = filepath.Join(lib("3.11.7"), "w")
	check("a workspace inside a version", ws, nil)
	ws = lib("3.11.7")
	check("the version is the workspace", ws, nil)
}

// BenchmarkBytecodeMirror measures what the first launch of a fresh state pays to mirror the
// system's bytecode (systemPythonLibs), and what every later launch pays to find it made.
func BenchmarkBytecodeMirror(b *testing.B) {
	libs := systemPythonLibs()
	if len(libs) == 0 {
		b.Skip("no system Python library folder")
	}
	b.Run("Make", func(b *testing.B) {
		for b.Loop() {
			if dir, err := bytecodeMirror(context.Background(), b.TempDir(), libs); err != nil || dir == "" {
				b.Fatal(dir, err)
			}
		}
	})
	// With the pyenv version the user's ~/.pyenv/version selects, when there is one (a
	// toolchain Python: toolchainPythonLibs).
	if home, err := os.UserHomeDir(); err == nil {
		if py := toolchainPythonLibs([]string{filepath.Join(home, ".pyenv")}, "/nonexistent", "", nil); len(py) > 0 {
			b.Run("MakeWithPyenv", func(b *testing.B) {
				for b.Loop() {
					if dir, err := bytecodeMirror(context.Background(), b.TempDir(), append(slices.Clone(libs), py...)); err != nil || dir == "" {
						b.Fatal(dir, err)
					}
				}
			})
		}
	}
	b.Run("Found", func(b *testing.B) {
		state := b.TempDir()
		if _, err := bytecodeMirror(context.Background(), state, libs); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if dir, err := bytecodeMirror(context.Background(), state, libs); err != nil || dir == "" {
				b.Fatal(dir, err)
			}
		}
	})
}
