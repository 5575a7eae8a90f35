package plan

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestAttackCheckStartupFoldersHoldsPath (review 17, F1; the real-box tests are
// integrity.TestAttackWorkspaceHoldsPathFolder and TestAttackWorkspaceHoldsLinkedPathFolder):
// a workspace that holds a folder of the launch's PATH, or the folder a PATH entry (or ~/bin)
// links to, is one whose programs the host runs by name: CheckStartupFolders must refuse it.
func TestAttackCheckStartupFoldersHoldsPath(t *testing.T) {
	for _, c := range []struct {
		ws, home string
		path     []string
	}{
		{"/home/u/tools", "/home/u", []string{"/home/u/tools/bin", "/usr/bin"}},
		{"/opt/x", "/home/u", []string{"/opt/x/bin", "/usr/bin"}},
	} {
		if err := CheckStartupFolders(c.ws, c.home, c.path); !errors.Is(err, ErrWorkspaceRefused) {
			t.Errorf("CheckStartupFolders(%s, PATH %v) = %v, want refused", c.ws, c.path, err)
		}
	}
	// ~/bin -> dotfiles/bin, on PATH; the workspace is ~/dotfiles (resolved, as the daemon passes it).
	home, _ := filepath.EvalSymlinks(t.TempDir())
	if err := os.MkdirAll(filepath.Join(home, "dotfiles", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dotfiles/bin", filepath.Join(home, "bin")); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(home, "dotfiles")
	if err := CheckStartupFolders(ws, home, []string{filepath.Join(home, "bin"), "/usr/bin"}); !errors.Is(err, ErrWorkspaceRefused) {
		t.Errorf("CheckStartupFolders(%s) with ~/bin -> dotfiles/bin on PATH = %v, want refused", ws, err)
	}
}
