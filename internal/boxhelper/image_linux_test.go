package boxhelper

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// imageMarkerEnv makes this test binary, started from an Image, print imageMarker and exit:
// proof of which program an Image runs.
const (
	imageMarkerEnv = "AGENTBOX_BOXHELPER_TEST_MARKER"
	imageMarker    = "this is the test binary"
)

func TestMain(m *testing.M) {
	if os.Getenv(imageMarkerEnv) != "" {
		os.Stdout.WriteString(imageMarker)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runImage runs the image with extra descriptors passed (which fork/exec moves onto 3, 4, …),
// and returns its output.
func runImage(t *testing.T, img *Image) string {
	t.Helper()
	var extra []*os.File
	for range 8 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		extra = append(extra, r, w)
	}
	cmd := exec.Command(img.ExecPath())
	cmd.Env = append(os.Environ(), imageMarkerEnv+"=1")
	cmd.ExtraFiles = extra
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run %s: %v", img.ExecPath(), err)
	}
	return string(out)
}

// TestSeal: the image holds the file's content, sealed (no write, resize or further seal), on
// a high descriptor; a later write to the file changes neither the image nor what it runs.
func TestSeal(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), HelperName)
	copyFile(t, self, path, 0o755)
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Seal(f, path)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	sum := sha256.Sum256(want)
	if img.Path != path || img.Digest != hex.EncodeToString(sum[:]) {
		t.Errorf("image %s sha256=%s; want %s sha256=%x", img.Path, img.Digest, path, sum)
	}
	if img.fd < imageMinFD || !strings.HasSuffix(img.ExecPath(), "/"+strconv.Itoa(img.fd)) {
		t.Errorf("image on descriptor %d (%s), want one ≥ %d", img.fd, img.ExecPath(), imageMinFD)
	}
	if flags, err := unix.FcntlInt(uintptr(img.fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("image descriptor flags %#x, %v: not close-on-exec", flags, err)
	}
	seals, err := unix.FcntlInt(uintptr(img.fd), unix.F_GET_SEALS, 0)
	wantSeals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if err != nil || seals&wantSeals != wantSeals {
		t.Errorf("seals %#x, %v; want %#x", seals, err, wantSeals)
	}
	got, err := os.ReadFile(img.ExecPath())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("image content differs from the file (%d bytes, want %d): %v", len(got), len(want), err)
	}
	// Neither a write nor a resize of the image succeeds, whoever holds it.
	if _, err := unix.Pwrite(img.fd, []byte("x"), 0); err == nil {
		t.Error("wrote to the sealed image")
	}
	if err := unix.Ftruncate(img.fd, 0); err == nil {
		t.Error("truncated the sealed image")
	}
	if _, err := unix.FcntlInt(uintptr(img.fd), unix.F_ADD_SEALS, 0); err == nil {
		// F_SEAL_SEAL: even an empty set of seals is refused.
		t.Error("added seals to the sealed image")
	}

	if out := runImage(t, img); out != imageMarker {
		t.Fatalf("image ran %q, want %q", out, imageMarker)
	}
	// The file rewritten in place, then replaced: the image runs what it held.
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("#!/bin/sh\necho planted\n")
	w.Close()
	copyFile(t, "/bin/true", path+".new", 0o755)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if out := runImage(t, img); out != imageMarker {
		t.Fatalf("after the file changed, the image ran %q, want %q", out, imageMarker)
	}
	if got, _ := os.ReadFile(img.ExecPath()); !bytes.Equal(got, want) {
		t.Error("the image changed with the file")
	}
}

// TestLoad: Load takes the helper OpenBinary accepts into an image, and what the image runs is
// what was checked, whatever happens to the file after; a helper that fails the checks is
// never loaded, and the first helper found decides (none further is tried).
func TestLoad(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, "agentbox")
	copyFile(t, self, exe, 0o755)
	helper := filepath.Join(bin, HelperName)
	copyFile(t, self, helper, 0o755)

	img, err := Load(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if img.Path != helper {
		t.Errorf("image of %s, want %s", img.Path, helper)
	}
	// A box that can write bin/ replaces the helper: the image still runs the checked one.
	copyFile(t, "/bin/true", helper+".planted", 0o755)
	if err := os.Rename(helper+".planted", helper); err != nil {
		t.Fatal(err)
	}
	if out := runImage(t, img); out != imageMarker {
		t.Fatalf("after the helper was replaced, the image ran %q, want %q", out, imageMarker)
	}
	// And a new Load refuses what is there now.
	if m, err := Load(exe); err == nil {
		m.Close()
		t.Fatal("Load accepted a helper of another build")
	}

	// The first helper found decides: a stale one beside agentbox is not passed over for a
	// good one in ../libexec/agentbox/.
	libexec := filepath.Join(filepath.Dir(bin), "libexec", "agentbox")
	if err := os.MkdirAll(libexec, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, self, filepath.Join(libexec, HelperName), 0o755)
	if m, err := Load(exe); err == nil {
		m.Close()
		t.Fatalf("Load took %s past a stale helper beside agentbox", m.Path)
	}
	os.Remove(helper)
	m, err := Load(exe)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if m.Path != filepath.Join(libexec, HelperName) {
		t.Errorf("image of %s, want the libexec helper", m.Path)
	}
}
