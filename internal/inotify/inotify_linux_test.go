package inotify

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDrainRealEvents reads what the kernel reports for a folder's changes: names of every
// length (the kernel pads them to different sizes), a folder event without a name, and the
// cookie pairing a rename's two halves.
func TestDrainRealEvents(t *testing.T) {
	dir := t.TempDir()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	defer unix.Close(fd)
	wd, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO|unix.IN_DELETE_SELF|unix.IN_ATTRIB)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "abcdefghijklmno", "abcdefghijklmnop", "x.json.tmp-123456789"}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // IN_ATTRIB on the folder itself: no name
		t.Fatal(err)
	}
	var got []Event
	buf := make([]byte, unix.SizeofInotifyEvent+unix.NAME_MAX+1)
	if err := Drain(fd, buf, func(e Event) { got = append(got, e) }); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		mask uint32
		name string
	}{
		{unix.IN_CREATE, names[0]}, {unix.IN_CREATE, names[1]}, {unix.IN_CREATE, names[2]}, {unix.IN_CREATE, names[3]},
		{unix.IN_MOVED_FROM, "a"}, {unix.IN_MOVED_TO, "b"}, {unix.IN_ATTRIB | unix.IN_ISDIR, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if got[i].Wd != int32(wd) || got[i].Mask != w.mask || got[i].Name != w.name {
			t.Errorf("event %d = %+v, want wd %d mask %#x name %q", i, got[i], wd, w.mask, w.name)
		}
	}
	if got[4].Cookie == 0 || got[4].Cookie != got[5].Cookie {
		t.Errorf("rename cookies %d, %d: want the same non-zero cookie", got[4].Cookie, got[5].Cookie)
	}
	// Nothing left: a second drain calls fn for nothing and returns nil (EAGAIN).
	if err := Drain(fd, buf, func(e Event) { t.Errorf("event after the drain: %+v", e) }); err != nil {
		t.Fatal(err)
	}
}

// TestParseTruncated: an event whose name runs past the buffer's end is not reported, and
// nothing is read out of bounds.
func TestParseTruncated(t *testing.T) {
	b := make([]byte, headerSize+4)
	binary.NativeEndian.PutUint32(b[12:], 16) // len says 16 bytes of name, only 4 are there
	Parse(b, func(e Event) { t.Errorf("parsed %+v from a truncated event", e) })
	Parse(b[:headerSize-1], func(e Event) { t.Errorf("parsed %+v from half a header", e) })
}
