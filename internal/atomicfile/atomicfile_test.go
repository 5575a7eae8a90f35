//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// entries returns the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// writers are the ways to replace a file: by path, and beneath an open folder with and
// without sync.
var writers = []struct {
	name  string
	write func(t *testing.T, path string, data []byte, perm os.FileMode) error
}{
	{"WriteFile", func(t *testing.T, path string, data []byte, perm os.FileMode) error {
		return WriteFile(path, data, perm)
	}},
	{"WriteAt-sync", func(t *testing.T, path string, data []byte, perm os.FileMode) error {
		return WriteAt(openDir(t, filepath.Dir(path)), filepath.Base(path), data, perm, true)
	}},
	{"WriteAt", func(t *testing.T, path string, data []byte, perm os.FileMode) error {
		return WriteAt(openDir(t, filepath.Dir(path)), filepath.Base(path), data, perm, false)
	}},
}

func TestWriteFile(t *testing.T) {
	old := syscall.Umask(0o077) // the mode given wins over the umask
	defer syscall.Umask(old)
	for _, w := range writers {
		for _, tc := range []struct {
			name string
			perm os.FileMode
			prev string // content before, "" for none
		}{
			{"new-0600", 0o600, ""},
			{"new-0755", 0o755, ""},
			{"replace-0644", 0o644, "old content that is longer than the new one"},
		} {
			t.Run(w.name+"/"+tc.name, func(t *testing.T) {
				dir := t.TempDir()
				p := filepath.Join(dir, "f.json")
				if tc.prev != "" {
					if err := os.WriteFile(p, []byte(tc.prev), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.write(t, p, []byte("new"), tc.perm); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(p)
				if err != nil || string(b) != "new" {
					t.Fatalf("content %q, %v; want %q", b, err, "new")
				}
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode() != tc.perm {
					t.Errorf("mode %v, want %v", fi.Mode(), tc.perm)
				}
				if names := entries(t, dir); len(names) != 1 {
					t.Errorf("directory holds %v, want only f.json (a temporary file was left)", names)
				}
			})
		}
	}
}

// TestWriteFileReplacesSymlink: a symlink planted at the path is replaced, and what it points
// to is neither written nor changed in mode.
func TestWriteFileReplacesSymlink(t *testing.T) {
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) { testReplacesSymlink(t, w.write) })
	}
}

func testReplacesSymlink(t *testing.T, write func(*testing.T, string, []byte, os.FileMode) error) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "state.json")
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if err := write(t, p, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the symlink's target now holds %q", b)
	}
	if fi, _ := os.Stat(target); fi.Mode() != 0o644 {
		t.Errorf("the symlink's target mode is %v", fi.Mode())
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("path is %v (%v), want a regular file", fi.Mode(), err)
	}
}

// TestWriteFileFailureLeavesOld: a write that cannot complete (the path is a directory, so the
// rename fails; the directory is not writable, so no temporary file) leaves what was there and
// no temporary file, and the error names the path.
func TestWriteFileFailureLeavesOld(t *testing.T) {
	for _, w := range writers {
		t.Run("rename-fails/"+w.name, func(t *testing.T) { testRenameFails(t, w.write) })
	}
	t.Run("no-temporary-file", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes into a read-only directory")
		}
		dir := t.TempDir()
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o700)
		if err := WriteFile(p, []byte("new"), 0o600); err == nil || !strings.Contains(err.Error(), p) {
			t.Fatalf("err = %v, want an error naming %s", err, p)
		}
		if b, _ := os.ReadFile(p); string(b) != "old" {
			t.Errorf("content %q, want the old one", b)
		}
	})
}

func testRenameFails(t *testing.T, write func(*testing.T, string, []byte, os.FileMode) error) {
	dir := t.TempDir()
	p := filepath.Join(dir, "taken")
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "inner"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := write(t, p, []byte("x"), 0o600)
	if err == nil || !strings.Contains(err.Error(), "taken: ") {
		t.Fatalf("err = %v, want an error naming taken", err)
	}
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		t.Errorf("%s is no longer the directory: %v", p, err)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v: the temporary file was left", names)
	}
}

// TestIsTemp: the temporary names WriteFile and WriteAt write are recognized, and names that
// only look alike are not.
func TestIsTemp(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{".x.tmp-12", ".a.b.tmp-1-2", ".config.json.tmp-4294967295-18446744073709551615"} {
		if !IsTemp(name) {
			t.Errorf("IsTemp(%q) = false", name)
		}
	}
	for _, name := range []string{"x.tmp-12", ".tmp-1", ".x.tmp-", ".x.tmp-1-", ".x.tmp--1", ".x.tmp-1-2-3", ".x.tmp-a", ".x.agentbox-tmp", "x"} {
		if IsTemp(name) {
			t.Errorf("IsTemp(%q) = true", name)
		}
	}
	// os.CreateTemp's names for WriteFile's pattern are among them.
	f, err := os.CreateTemp(dir, ".f.tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if name := filepath.Base(f.Name()); !IsTemp(name) {
		t.Errorf("IsTemp(%q) = false for os.CreateTemp's pattern as WriteFile uses it", name)
	}
}
