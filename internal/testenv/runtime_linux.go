package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// shmMinFree is the free space /dev/shm needs to hold the test daemons' runtime directories:
// each holds sockets, a bytecode mirror of symlinks and the launches' small run files, well
// under a megabyte, and the suites run a few dozen at once.
const shmMinFree = 256 << 20

// RuntimeDir makes a folder for a test daemon's XDG_RUNTIME_DIR and removes it when t ends
// (after the cleanups registered later, such as the one stopping that daemon). It lies on a
// tmpfs (/dev/shm) when there is one, as a user's runtime directory does (/run/user/UID):
// on a disk, each test daemon's start made its Python bytecode mirror, some 2,000 symlinks,
// at 0.43 s of mostly ext4 CPU time against 0.03 s on a tmpfs (BenchmarkBytecodeMirror), and
// the suites start hundreds of daemons. Elsewhere, or when /dev/shm has less than
// shmMinFree free (a container's is often 64 MiB), it lies in os.TempDir(). The folder above
// it is the test's own: it holds no other test's runtime directory (a test of the package's
// restart-daemons script gives it as the root of the users' runtime directories). A test run
// killed before its cleanups leaves its folders there, as it would in /tmp, until the next boot.
func RuntimeDir(t testing.TB, prefix string) string {
	t.Helper()
	parent := os.TempDir()
	var fs unix.Statfs_t
	if unix.Statfs("/dev/shm", &fs) == nil && fs.Type == unix.TMPFS_MAGIC &&
		fs.Bavail*uint64(fs.Bsize) >= shmMinFree && unix.Access("/dev/shm", unix.W_OK|unix.X_OK) == nil {
		parent = "/dev/shm"
	}
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	return run
}
