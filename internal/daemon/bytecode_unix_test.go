//go:build unix

package daemon

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestPyenvVersionFIFO: a .python-version a box made a FIFO is not read: the daemon, which
// reads it at the launch's plan (pyenvVersions), would wait on it for a writer, and the root's
// version file is not taken in its place either (the nearest .python-version decides).
func TestPyenvVersionFIFO(t *testing.T) {
	home := t.TempDir()
	pyenv := filepath.Join(home, ".pyenv")
	if err := os.MkdirAll(filepath.Join(pyenv, "versions", "3.11.7", "lib", "python3.11"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(pyenv, "version"), []byte("3.11.7\n"), 0o644)
	ws := filepath.Join(home, "proj")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, ".python-version"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan []string)
	go func() { done <- toolchainPythonLibs([]string{pyenv}, ws, ws, nil) }()
	select {
	case got := <-done:
		if len(got) != 0 {
			t.Errorf("with a FIFO .python-version: %v, want none", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon waits on a FIFO .python-version")
	}
}
