package changes

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTakeHidden: the launch's version of a tracked file is kept as a proposed change that
// modifies it and the file is put back (its permission bits kept), and Apply puts the launch's
// version back; a change the store holds at the path already, a symlink and a FIFO (not
// waited on) are refused with the host's file as it was and nothing kept.
func TestTakeHidden(t *testing.T) {
	ws, store := t.TempDir(), filepath.Join(t.TempDir(), "changes")
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	p := filepath.Join(ws, "sub", "build.sh")
	if err := os.WriteFile(p, []byte("box\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := TakeHidden(store, ws, "sub/build.sh", []byte("host\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "host\n" {
		t.Errorf("put back %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o750 {
		t.Errorf("put back with mode %v, want 0750", fi.Mode().Perm())
	}
	cs, err := List(store)
	if err != nil || len(cs) != 1 || cs[0].Path != "sub/build.sh" || !cs[0].Modifies || !cs[0].Hidden || string(cs[0].Content) != "box\n" || string(cs[0].Base) != "host\n" {
		t.Fatalf("kept %+v, %v", cs, err)
	}
	// Again at the same path: the store's change is never replaced, the file left.
	os.WriteFile(p, []byte("box2\n"), 0o750)
	if _, err := TakeHidden(store, ws, "sub/build.sh", []byte("host\n")); !errors.Is(err, ErrStoreHolds) {
		t.Errorf("a second take at the path: %v, want ErrStoreHolds", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "box2\n" {
		t.Errorf("the file refused became %q", b)
	}
	os.WriteFile(p, []byte("host\n"), 0o750)
	if err := Apply(store, ws, "sub/build.sh"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "box\n" {
		t.Errorf("apply put %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(store, "sub", "*")); len(left) > 0 {
		t.Errorf("apply left %q in the store", left)
	}
	// Not a regular file: refused, nothing kept, the FIFO's open not waited on.
	os.Symlink("build.sh", filepath.Join(ws, "link"))
	unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644)
	for _, rel := range []string{"link", "fifo", "../x"} {
		if _, err := TakeHidden(store, ws, rel, []byte("x")); err == nil {
			t.Errorf("%s taken", rel)
		}
	}
	if cs, _ := List(store); len(cs) != 0 {
		t.Errorf("kept %+v", cs)
	}
}
