package hostprog

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func writeProg(t *testing.T, path, out string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestFindOnce (review 18, F1): a program is looked up once; one written later in an earlier
// folder of PATH (as a box wrote bin/git in a workspace folder on the daemon's PATH) is never
// run in its place. Relative and empty PATH entries are passed over.
func TestFindOnce(t *testing.T) {
	early, late, cwd := t.TempDir(), t.TempDir(), t.TempDir()
	name := "hostprog-test-prog"
	writeProg(t, filepath.Join(late, name), "host")
	writeProg(t, filepath.Join(cwd, name), "relative")
	t.Chdir(cwd)
	t.Setenv("PATH", ".::"+early+":"+late)
	p, err := Find(name)
	if err != nil || p.Path != filepath.Join(late, name) {
		t.Fatalf("Find = %+v, %v; want %s", p, err, filepath.Join(late, name))
	}
	writeProg(t, filepath.Join(early, name), "planted")
	out, err := Command(context.Background(), name).Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != "host" {
		t.Errorf("after a program was written earlier on PATH, Command ran the one saying %q (%v), want the one found first (host)", got, err)
	}
	if f := Found(); len(f) != 1 || f[0].Name != name || f[0].Real != filepath.Join(late, name) {
		t.Errorf("Found() = %+v", f)
	}
}

// TestFindMissingThenInstalled: a program not found is looked up again (installed since).
func TestFindMissingThenInstalled(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	name := "hostprog-test-missing"
	if _, err := Find(name); !errors.Is(err, exec.ErrNotFound) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Find of a missing program = %v, want exec.ErrNotFound naming PATH", err)
	}
	if err := Command(context.Background(), name).Run(); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Command of a missing program: Run = %v, want exec.ErrNotFound", err)
	}
	writeProg(t, filepath.Join(dir, name), "x")
	if p, err := Find(name); err != nil || p.Path != filepath.Join(dir, name) {
		t.Errorf("Find after install = %+v, %v", p, err)
	}
	if _, err := Find("rel/prog"); err == nil {
		t.Error("Find of a relative path: no error")
	}
}
