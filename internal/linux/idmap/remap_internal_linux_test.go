package idmap

import (
	"os"
	"path/filepath"
	"testing"
)

// TestClosedAncestorShared: one cover's paths share what was read of their folders (seen),
// and each still gets its own topmost closed folder — a path under an open sibling of a
// closed folder is not taken for closed, a path through a link is left as it is.
func TestClosedAncestorShared(t *testing.T) {
	root := t.TempDir()
	// t.TempDir's own folder and its parent (0700) are searchable by others here.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	open := filepath.Join(root, "open", "a", "b")
	closed := filepath.Join(root, "open", "closed")
	for _, d := range []string{open, filepath.Join(closed, "x", "y")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "open"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(closed, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	seen := map[string]folderMode{}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(closed, "x", "y"), closed},
		{filepath.Join(open, "file"), filepath.Join(open, "file")},
		{filepath.Join(closed, "x"), closed},
		{filepath.Join(open, "c"), filepath.Join(open, "c")},
		{filepath.Join(root, "link", "x"), filepath.Join(root, "link", "x")},
		{closed, closed},
	} {
		if got := closedAncestor(c.path, seen); got != c.want {
			t.Errorf("closedAncestor(%s) = %s, want %s", c.path, got, c.want)
		}
		// The same answer without what earlier calls read.
		if got := closedAncestor(c.path, map[string]folderMode{}); got != c.want {
			t.Errorf("closedAncestor(%s), nothing seen before, = %s, want %s", c.path, got, c.want)
		}
	}
	if m := seen[filepath.Join(root, "open")]; !m.dir || m.closed {
		t.Errorf("seen[open] = %+v, want an open folder", m)
	}
	if m := seen[closed]; !m.dir || !m.closed {
		t.Errorf("seen[closed] = %+v, want a closed folder", m)
	}
}
