package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCreateAt: a new name gets the data, with perm masked by the umask; an existing file,
// folder, symlink or dangling symlink at the name fails with fs.ErrExist and is left as it
// was; no temporary file remains either way. The fallback for a file system without
// RENAME_NOREPLACE (a hard link) does the same.
func TestCreateAt(t *testing.T) {
	old := unix.Umask(0o027)
	defer unix.Umask(old)
	for _, tc := range []struct {
		name     string
		noRename bool
	}{{"renameat2", false}, {"link fallback", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.noRename {
				saved := renameNoReplace
				renameNoReplace = func(int, string, string) error { return unix.EINVAL }
				defer func() { renameNoReplace = saved }()
			}
			dir := t.TempDir()
			fd := openDir(t, dir)
			if err := CreateAt(fd, "hook", []byte("#!/bin/sh\n"), 0o755, true); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(filepath.Join(dir, "hook"))
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o750 {
				t.Fatalf("hook: %v %v, want a regular file 0750 (0755 under umask 027)", fi, err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "hook")); string(b) != "#!/bin/sh\n" {
				t.Errorf("hook holds %q", b)
			}
			if err := os.WriteFile(filepath.Join(dir, "file"), []byte("host"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "folder"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("file", filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("nowhere", filepath.Join(dir, "dangling")); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"hook", "file", "folder", "link", "dangling"} {
				if err := CreateAt(fd, name, []byte("box"), 0o644, false); !errors.Is(err, fs.ErrExist) {
					t.Errorf("CreateAt over %s = %v, want fs.ErrExist", name, err)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "file")); string(b) != "host" {
				t.Errorf("file holds %q, want the host's", b)
			}
			if l, _ := os.Readlink(filepath.Join(dir, "dangling")); l != "nowhere" {
				t.Errorf("dangling now leads to %q", l)
			}
			if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the dangling symlink was written through: %v", err)
			}
			if names := entries(t, dir); len(names) != 5 {
				t.Errorf("folder holds %v, want the five names and no temporary file", names)
			}
		})
	}
}

// TestRenameAside: a file moved aside is renamed beside itself (NAME.agentbox-quarantined-N); a
// folder keeps its name in the hidden folder .agentbox-quarantined-N beside it (review 15,
// F13: renamed in place, a node_modules was no longer skipped by the host's test runners);
// never over an existing one; a quarantine folder that is a symlink (a box's, leading
// elsewhere) is passed over: nothing lands where it leads.
func TestRenameAside(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	for _, n := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, QuarantineSuffix+"1")); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	got, err := RenameAside(fd, "a")
	if want := QuarantineSuffix + "2/a"; err != nil || got != want {
		t.Fatalf("RenameAside(a) = %q, %v; want %q (the symlinked folder passed over)", got, err, want)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("a folder landed where the box's symlink leads: %v", ents)
	}
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := RenameAside(fd, "a"); err != nil || got != QuarantineSuffix+"3/a" {
		t.Errorf("RenameAside(a) again = %q, %v; want the next folder, not over the first", got, err)
	}
	if got, err := RenameAside(fd, "b"); err != nil || got != QuarantineSuffix+"2/b" {
		t.Errorf("RenameAside(b) = %q, %v; want the first folder where b is free", got, err)
	}
	if got, err := RenameAside(fd, "f"); err != nil || got != "f"+QuarantineSuffix+"1" {
		t.Errorf("RenameAside(f) = %q, %v; want the file renamed beside itself", got, err)
	}
}
