package changes

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	res, err := takeIgnored(dir, ws, []string{".mcp.json", "bin/a", "build/big", "gone", "bin/b", "bin/c"}, 0, 2, 10)
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
	res, err = takeIgnored(dir, ws, []string{"link/secret"}, 0, 100, 100)
	if err != nil || len(res.Kept) != 0 || len(res.Failed) != 1 {
		t.Errorf("link/secret: %+v %v, want one failure", res, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Errorf("the file beyond the symlink was moved: %v", err)
	}
	// A second pass counts what the store holds: one more file is past the bound.
	os.WriteFile(filepath.Join(ws, "bin/d"), []byte("d"), 0o644)
	res, err = takeIgnored(dir, ws, []string{"bin/d"}, 0, 1, 10)
	if err != nil || len(res.Kept) != 0 || res.Dropped.Count != 4 {
		t.Errorf("second pass: %+v %v, want bin/d removed (4 in all)", res, err)
	}
}

// TestTakeIgnoredCutsOtherNames (review 16, F4): the store keeps a copy of a taken file, a new
// inode: what still reaches the box's file (another name of it, a descriptor open in a second
// box) and writes after the take changes neither what the store holds nor what Apply puts
// back. Apply puts back only what the mark's SHA-256 names: a store file changed since (or a
// mark without one, of an agentbox that renamed) is refused, and nothing is written.
func TestTakeIgnoredCutsOtherNames(t *testing.T) {
	ws, dir := t.TempDir(), filepath.Join(t.TempDir(), "changes")
	os.MkdirAll(filepath.Join(ws, "bin"), 0o755)
	tool := filepath.Join(ws, "bin", "tool")
	if err := os.WriteFile(tool, []byte("echo benign\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(tool, filepath.Join(ws, "bin", "other")); err != nil {
		t.Fatal(err)
	}
	open, err := os.OpenFile(tool, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	res, err := takeIgnored(dir, ws, []string{"bin/tool"}, 0, 10, 1<<20)
	if err != nil || strings.Join(res.Kept, " ") != "bin/tool" {
		t.Fatalf("take: %+v %v", res, err)
	}
	if _, err := open.WriteAt([]byte("echo EVIL!!\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "bin", "other"), []byte("echo EVIL2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cs, err := List(dir)
	if err != nil || len(cs) != 1 || string(cs[0].Content) != "echo benign\n" {
		t.Fatalf("the store after writes through the other name and the descriptor: %+v %v", cs, err)
	}
	if want := fmt.Sprintf("%x", sha256.Sum256([]byte("echo benign\n"))); cs[0].SHA256 != want {
		t.Errorf("Index's SHA-256 of bin/tool: %q, want %q (what was taken)", cs[0].SHA256, want)
	}
	if err := Apply(dir, ws, "bin/tool"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(tool); string(b) != "echo benign\n" {
		t.Errorf("apply put back %q, want what was taken", b)
	}

	// A store file changed after the take, and a mark without a hash: refused, nothing written.
	for name, spoil := range map[string]func(src string){
		"changed": func(src string) { os.WriteFile(src, []byte("echo other\n"), 0o755) },
		"no hash": func(src string) { os.WriteFile(src+IgnoredSuffix, nil, 0o600) },
	} {
		rel := "bin/" + strings.ReplaceAll(name, " ", "-")
		os.WriteFile(filepath.Join(ws, rel), []byte("echo kept\n"), 0o755)
		if res, err := takeIgnored(dir, ws, []string{rel}, 0, 10, 1<<20); err != nil || len(res.Kept) != 1 {
			t.Fatalf("%s: take: %+v %v", name, res, err)
		}
		spoil(filepath.Join(dir, rel))
		if err := Apply(dir, ws, rel); err == nil || !strings.Contains(err.Error(), rel) {
			t.Errorf("%s: apply: %v, want a refusal naming %s", name, err, rel)
		}
		if _, err := os.Lstat(filepath.Join(ws, rel)); err == nil {
			t.Errorf("%s: apply wrote %s", name, rel)
		}
	}
}

// TestTakeIgnoredSparse: the copy into the store keeps the bytes (data, zeros, a hole, a
// partial last block) and leaves the blocks of zeros as holes.
func TestTakeIgnoredSparse(t *testing.T) {
	ws, dir := t.TempDir(), filepath.Join(t.TempDir(), "changes")
	want := make([]byte, 5<<20+123)
	copy(want[1<<20:], "data in the second block")
	want[len(want)-1] = 'x'
	if err := os.WriteFile(filepath.Join(ws, "big"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := takeIgnored(dir, ws, []string{"big"}, 0, 10, 1<<30); err != nil || len(res.Kept) != 1 || res.KeptBytes != int64(len(want)) {
		t.Fatalf("take: %+v %v", res, err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "big"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the store's copy differs (%d bytes, want %d): %v", len(got), len(want), err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "big"), &st); err != nil || st.Blocks*512 >= int64(len(want)) {
		t.Errorf("the store's copy takes %d bytes on disk (%v), want holes for the zeros", st.Blocks*512, err)
	}
	os.WriteFile(filepath.Join(ws, "big"), []byte("the host's rebuild\n"), 0o644)
	if err := Apply(dir, ws, "big"); err == nil || !errors.Is(err, ErrConflict) {
		t.Errorf("apply over the host's file: %v, want a conflict", err)
	}
	os.Remove(filepath.Join(ws, "big"))
	if err := Apply(dir, ws, "big"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "big")); !bytes.Equal(got, want) {
		t.Errorf("apply put back other bytes")
	}
}

// TestTakeIgnoredKeepsHostFiles (review 17, F3): a file whose own ctime is before the launch
// (the host's bytes, taken only because a folder above it was renamed or made in the launch)
// is never removed past the bounds: it is moved into the store by a rename (Moved, marked, and
// listed by Index like any other), or left in place (Left) at a path the store holds a change
// of already. The launch's own files past the bounds are removed, as before. Before, every
// file past the bounds was removed: the user's mv data/old data/archive while a box ran lost
// the files past the 10,000th.
func TestTakeIgnoredKeepsHostFiles(t *testing.T) {
	ws, dir := t.TempDir(), filepath.Join(t.TempDir(), "changes")
	write := func(p, c string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		write(fmt.Sprintf("data/archive/m%d.csv", i), fmt.Sprintf("measurement %d\n", i))
	}
	write("data/archive/dup.csv", "host\n")
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, "data/archive/dup.csv"), &st); err != nil {
		t.Fatal(err)
	}
	since := st.Ctim.Nano() + 1       // the launch began after the host's files were written
	time.Sleep(30 * time.Millisecond) // past the file system's timestamp granularity
	write("data/new.bin", "box")
	if err := os.MkdirAll(filepath.Join(dir, "data", "archive"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "archive", "dup.csv"), []byte("earlier"), 0o600); err != nil {
		t.Fatal(err)
	}
	rels := []string{"data/archive/dup.csv", "data/archive/m0.csv", "data/archive/m1.csv", "data/archive/m2.csv", "data/archive/m3.csv", "data/archive/m4.csv", "data/new.bin"}
	res, err := takeIgnored(dir, ws, rels, since, 2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Kept, " ") != "data/archive/m0.csv data/archive/m1.csv" {
		t.Errorf("kept %v, want the first two (the bound)", res.Kept)
	}
	if strings.Join(res.Moved, " ") != "data/archive/m2.csv data/archive/m3.csv data/archive/m4.csv" {
		t.Errorf("moved past the bound %v, want m2–m4 (the host's)", res.Moved)
	}
	if strings.Join(res.Left, " ") != "data/archive/dup.csv" {
		t.Errorf("left in place %v, want data/archive/dup.csv (the store holds a change there)", res.Left)
	}
	if res.Dropped.Count != 1 || strings.Join(res.Dropped.Paths, " ") != "data/new.bin" {
		t.Errorf("removed %+v, want only data/new.bin (the launch's, past the bound)", res.Dropped)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "data/archive/dup.csv")); err != nil || string(b) != "host\n" {
		t.Errorf("the host's dup.csv: %q %v, want it in place", b, err)
	}
	for i := range 5 {
		p := fmt.Sprintf("data/archive/m%d.csv", i)
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(b) != fmt.Sprintf("measurement %d\n", i) {
			t.Errorf("%s in the store: %q %v", p, b, err)
		}
		if err := checkIgnored(filepath.Join(dir, p), p); err != nil {
			t.Errorf("%s: its mark does not hold what was kept: %v", p, err)
		}
	}
}

// TestTakeIgnoredExecOnly (review 17, F8): a regular file of the daemon's own that it cannot
// read (mode 0111: a program the kernel runs for a caller that cannot read it) has its
// owner's read bit given back and is kept with its bytes. Before, the copy failed with EACCES
// and the file stayed in the workspace. As root the file is read anyway (DAC override): the
// test says nothing new there.
func TestTakeIgnoredExecOnly(t *testing.T) {
	ws, dir := t.TempDir(), filepath.Join(t.TempDir(), "changes")
	p := filepath.Join(ws, "build", "app")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("\x7fELF program"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o111); err != nil {
		t.Fatal(err)
	}
	res, err := takeIgnored(dir, ws, []string{"build/app"}, 0, 10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kept) != 1 || len(res.Failed) != 0 {
		t.Errorf("kept %v, failed %v: want build/app kept", res.Kept, res.Failed)
	}
	if _, err := os.Lstat(p); err == nil {
		t.Errorf("build/app (mode 0111) is still in the workspace")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "build", "app")); err != nil || string(b) != "\x7fELF program" {
		t.Errorf("what was kept: %q %v", b, err)
	}
}
