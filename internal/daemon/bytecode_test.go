package daemon

import (
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
		"python3.11/__pycache__/os.cpython-311.pyc":           "os",
		"python3.11/json/__pycache__/decoder.cpython-311.pyc": "decoder",
		"python3.11/json/__pycache__/notes.txt":               "not bytecode",
		"python3.11/json/stray.cpython-311.pyc":               "not in a __pycache__",
		"python3.11/json/decoder.py":                          "source",
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

	dir, err := bytecodeMirror(state, []string{lib})
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
	if again, err := bytecodeMirror(state, []string{lib}); err != nil || again != dir {
		t.Errorf("the same libraries again: %q, %v; want %q", again, err, dir)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(lib, later, later); err != nil {
		t.Fatal(err)
	}
	next, err := bytecodeMirror(state, []string{lib})
	if err != nil || next == dir || next == "" {
		t.Fatalf("after the library changed: %q, %v; want a new generation", next, err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("the old generation stays: %v", err)
	}
	if none, err := bytecodeMirror(state, []string{t.TempDir()}); none != "" || err != nil {
		t.Errorf("libraries without bytecode: %q, %v; want none", none, err)
	}

	cache := t.TempDir()
	prefix := filepath.Join(cache, "python", "pycache")
	var c plan.Contributions
	if err := cacheOverlays(cache, "launch1", []packageCache{{name: "python", dir: prefix, lower: next}}, nil, plan.WorkspaceFacts{}, &c); err != nil {
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

// BenchmarkBytecodeMirror measures what the first launch of a fresh state pays to mirror the
// system's bytecode (systemPythonLibs), and what every later launch pays to find it made.
func BenchmarkBytecodeMirror(b *testing.B) {
	libs := systemPythonLibs()
	if len(libs) == 0 {
		b.Skip("no system Python library folder")
	}
	b.Run("Make", func(b *testing.B) {
		for b.Loop() {
			if dir, err := bytecodeMirror(b.TempDir(), libs); err != nil || dir == "" {
				b.Fatal(dir, err)
			}
		}
	})
	b.Run("Found", func(b *testing.B) {
		state := b.TempDir()
		if _, err := bytecodeMirror(state, libs); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if dir, err := bytecodeMirror(state, libs); err != nil || dir == "" {
				b.Fatal(dir, err)
			}
		}
	})
}
