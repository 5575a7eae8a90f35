//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openDir opens dir as WriteAt's callers do (O_PATH where the system has it).
func openDir(t *testing.T, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|oPath, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestWriteAtStaysInFolder: the folder is the one opened, whatever its path became since (a
// path swapped for a symlink to elsewhere is not followed), a symlink at the name is replaced
// and its target untouched, and a name that is not one path element is refused.
func TestWriteAtStaysInFolder(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "d")
	elsewhere := filepath.Join(root, "elsewhere")
	for _, d := range []string{dir, elsewhere} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	fd := openDir(t, dir)
	// The folder's path now leads elsewhere; the descriptor still names the folder opened.
	moved := filepath.Join(root, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(elsewhere, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(moved, "state.json")); err != nil {
		t.Fatal(err)
	}
	if err := WriteAt(fd, "state.json", []byte("secret"), 0o600, true); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(moved, "state.json")); err != nil || string(b) != "secret" {
		t.Errorf("the folder opened holds %q (%v), want the new content", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(moved, "state.json")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("state.json is %v (%v), want a regular file in place of the symlink", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the symlink's target now holds %q", b)
	}
	if names := entries(t, elsewhere); len(names) != 1 {
		t.Errorf("the folder the path now leads to holds %v, want only target", names)
	}
	for _, name := range []string{"", ".", "..", "../state.json", "sub/state.json"} {
		if err := WriteAt(fd, name, []byte("x"), 0o600, false); err == nil || !strings.Contains(err.Error(), "not a name within a folder") {
			t.Errorf("WriteAt(%q) = %v, want a refusal", name, err)
		}
	}
}
