package inotify

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReader: a Read waits while the instance has no event and returns the event a file's
// creation raises; a Read waiting on an empty queue returns os.ErrClosed once Close is called,
// and Close returns after it, with the descriptor closed; a Read or an AddWatch after Close
// fails at once.
func TestReader(t *testing.T) {
	dir := t.TempDir()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	r, err := NewReader(fd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddWatch(dir, unix.IN_CREATE); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
		buf []byte
	}
	read := func() chan result {
		c := make(chan result, 1)
		go func() {
			buf := make([]byte, 4096)
			n, err := r.Read(buf)
			c <- result{n, err, buf}
		}()
		return c
	}
	c := read()
	if err := os.WriteFile(filepath.Join(dir, "made"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got := <-c
	if got.err != nil {
		t.Fatalf("Read: %v", got.err)
	}
	var names []string
	Parse(got.buf[:got.n], func(ev Event) { names = append(names, ev.Name) })
	if len(names) != 1 || names[0] != "made" {
		t.Fatalf("events read: %q, want [made]", names)
	}
	c = read() // nothing comes: it waits until Close
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := <-c; !errors.Is(got.err, os.ErrClosed) {
		t.Fatalf("the waiting Read after Close: %d, %v; want os.ErrClosed", got.n, got.err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("the descriptor after Close: %v, want it closed (EBADF)", err)
	}
	if _, err := r.Read(make([]byte, 4096)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Read after Close: %v, want os.ErrClosed", err)
	}
	if _, err := r.AddWatch(dir, unix.IN_CREATE); !errors.Is(err, os.ErrClosed) {
		t.Errorf("AddWatch after Close: %v, want os.ErrClosed (the descriptor's number may be another instance's by now)", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
