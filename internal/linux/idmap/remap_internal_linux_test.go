package idmap

import (
	"os"
	"path/filepath"
	"testing"
)

// TestClosedAncestorShared: one cover's paths share what was read of their folders (seen),
// and each still gets its own topmost closed folder — a path under an open folder of the same
// name as a closed one elsewhere is not taken for closed, and a path through a link, a
// missing folder or a file is left as it is — each folder read once.
func TestClosedAncestorShared(t *testing.T) {
	root := t.TempDir()
	// t.TempDir's own folder and its parent (0700) are searchable by others here.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if a := closedAncestor(filepath.Join(root, "x"), map[string]folderMode{}); a != filepath.Join(root, "x") {
		t.Skipf("a folder above the test's (%s) is closed to others: TMPDIR lies beneath it", a)
	}
	open := filepath.Join(root, "open", "a", "b")
	closed := filepath.Join(root, "open", "closed")
	twin := filepath.Join(root, "other", "closed") // same name, open
	for _, d := range []string{open, filepath.Join(closed, "x", "y"), filepath.Join(twin, "z")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(closed, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	seen := map[string]folderMode{}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(closed, "x", "y"), closed},
		{filepath.Join(open, "file"), filepath.Join(open, "file")},
		{filepath.Join(closed, "x"), closed},
		{filepath.Join(twin, "z"), filepath.Join(twin, "z")},
		{filepath.Join(open, "c"), filepath.Join(open, "c")},
		{filepath.Join(root, "link", "x"), filepath.Join(root, "link", "x")},
		{filepath.Join(root, "missing", "x", "y"), filepath.Join(root, "missing", "x", "y")},
		{filepath.Join(root, "file", "x"), filepath.Join(root, "file", "x")},
		{closed, closed},
		{filepath.Join(closed, "x", "y", "w"), closed},
	} {
		if got := closedAncestor(c.path, seen); got != c.want {
			t.Errorf("closedAncestor(%s) = %s, want %s", c.path, got, c.want)
		}
		// The same answer without what earlier calls read.
		if got := closedAncestor(c.path, map[string]folderMode{}); got != c.want {
			t.Errorf("closedAncestor(%s), nothing seen before, = %s, want %s", c.path, got, c.want)
		}
	}
	for dir, want := range map[string]folderMode{
		filepath.Join(root, "open"):    {dir: true},
		closed:                         {dir: true, closed: true},
		filepath.Join(root, "other"):   {dir: true},
		twin:                           {dir: true},
		filepath.Join(root, "link"):    {},
		filepath.Join(root, "missing"): {},
		filepath.Join(root, "file"):    {},
	} {
		if got, ok := seen[dir]; !ok || got != want {
			t.Errorf("seen[%s] = %+v (read %v), want %+v", dir, got, ok, want)
		}
	}
	// What was read is not read again: a folder changed since keeps its first reading within
	// one cover (the old walk would see the change; one cover's paths are judged at one time).
	if err := os.Chmod(filepath.Join(root, "open"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := closedAncestor(filepath.Join(open, "d"), seen); got != filepath.Join(open, "d") {
		t.Errorf("closedAncestor read a folder again: %s", got)
	}
}
