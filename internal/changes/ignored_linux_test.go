package changes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTakeIgnored: the files a launch left in ignored places are moved into the store, marked
// ignored, listed by Index and put back by Apply; past the bounds (here 2 files, 10 bytes)
// each is removed from the workspace and counted, never left in place; a path the store holds
// a change of already (a guarded protected path) is removed too; a file gone meanwhile is
// skipped.
func TestTakeIgnored(t *testing.T) {
	ws, dir := t.TempDir(), filepath.Join(t.TempDir(), "changes")
	files := map[string]string{"bin/a": "aaaa", "bin/b": "bbbb", "bin/c": "cccc", "build/big": "0123456789xyz", ".mcp.json": "{}"}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".mcp.json"), []byte(`{"box":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := takeIgnored(dir, ws, []string{".mcp.json", "bin/a", "build/big", "gone", "bin/b", "bin/c"}, 2, 10)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Kept, " ") != "bin/a bin/b" || res.KeptBytes != 8 {
		t.Errorf("kept %v (%d bytes), want bin/a bin/b (8)", res.Kept, res.KeptBytes)
	}
	if res.Dropped.Count != 3 || strings.Join(res.Dropped.Paths, " ") != ".mcp.json build/big bin/c" {
		t.Errorf("dropped %+v, want .mcp.json (the store's already), build/big (past the bytes), bin/c (past the files)", res.Dropped)
	}
	for p := range files {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s is still in the workspace", p)
		}
	}
	if d, err := ReadIgnoredDropped(dir); err != nil || d.Count != 3 {
		t.Errorf("the record of the files removed: %+v %v", d, err)
	}
	cs, err := Index(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ignored []string
	for _, c := range cs {
		if c.Ignored {
			ignored = append(ignored, c.Path)
		}
	}
	if len(cs) != 3 || strings.Join(ignored, " ") != "bin/a bin/b" {
		t.Errorf("Index: %+v, want .mcp.json and the two ignored files", cs)
	}
	if err := Apply(dir, ws, "bin/a"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "bin/a")); err != nil || string(b) != "aaaa" {
		t.Errorf("bin/a after apply: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "bin/a"+IgnoredSuffix)); err == nil {
		t.Errorf("the mark of bin/a is left in the store after apply")
	}
	if fi, err := os.Stat(filepath.Join(ws, "bin/a")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/a after apply: %v %v, want mode 0755", fi, err)
	}
	// A folder on the way that is a symlink is not followed: nothing outside is moved.
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600)
	os.Symlink(outside, filepath.Join(ws, "link"))
	res, err = takeIgnored(dir, ws, []string{"link/secret"}, 100, 100)
	if err != nil || len(res.Kept) != 0 || len(res.Failed) != 1 {
		t.Errorf("link/secret: %+v %v, want one failure", res, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Errorf("the file beyond the symlink was moved: %v", err)
	}
	// A second pass counts what the store holds: one more file is past the bound.
	os.WriteFile(filepath.Join(ws, "bin/d"), []byte("d"), 0o644)
	res, err = takeIgnored(dir, ws, []string{"bin/d"}, 1, 10)
	if err != nil || len(res.Kept) != 0 || res.Dropped.Count != 4 {
		t.Errorf("second pass: %+v %v, want bin/d removed (4 in all)", res, err)
	}
}
