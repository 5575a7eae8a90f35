package changes

// Review 32 (B): two ways the user's own files were lost. Each fails on the code before.

import (
	"fmt"
	"os"
	"path/filepath"
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
	cs, err := List(store)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cs {
		got[c.Path] = string(c.Content)
	}
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
