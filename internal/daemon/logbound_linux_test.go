package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRotateLogBounds (issue 21, finding 10's log): the daemon's log, appended to for the
// daemon's life and by every daemon after it, grew without bound (each launch's brokers may
// write audit.maxRowsPerLaunch lines). Past the bound it is moved to daemon.log.1 and the
// descriptors that wrote it write a new one; a descriptor that is not the log is left alone.
func TestRotateLogBounds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, logFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	// Another descriptor of the process, standing in for the daemon's standard error.
	fd2, err := unix.Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd2)
	f.WriteString(strings.Repeat("x", 100))
	if rotated, err := rotateLog(path, []int{fd, fd2}, 100); err != nil || rotated {
		t.Fatalf("a log at its bound: rotated %v, %v; want left alone", rotated, err)
	}
	f.WriteString("y\n")
	if rotated, err := rotateLog(path, []int{fd, fd2}, 100); err != nil || !rotated {
		t.Fatalf("a log past its bound: rotated %v, %v; want rotated", rotated, err)
	}
	if b, err := os.ReadFile(path + ".1"); err != nil || len(b) != 102 {
		t.Errorf("%s.1 holds %d bytes (%v); want the old log's 102", path, len(b), err)
	}
	unix.Write(fd, []byte("after\n"))
	unix.Write(fd2, []byte("and after\n"))
	if b, err := os.ReadFile(path); err != nil || string(b) != "after\nand after\n" {
		t.Errorf("the new log holds %q (%v); want what both descriptors wrote after", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the new log: %v %v; want mode 0600", fi.Mode(), err)
	}
	// A descriptor that is another file (a terminal, the journal) is never rotated.
	other, err := os.CreateTemp(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.WriteString(strings.Repeat("z", 500))
	os.WriteFile(path, []byte(strings.Repeat("w", 500)), 0o600)
	if rotated, err := rotateLog(path, []int{int(other.Fd())}, 100); err != nil || rotated {
		t.Errorf("a daemon whose output is not the log: rotated %v, %v", rotated, err)
	}
}
