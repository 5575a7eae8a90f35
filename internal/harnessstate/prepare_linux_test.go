//go:build linux

package harnessstate

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/profile"
)

// TestPrepare makes a profile's state entries and re-makes what a box replaced with another
// kind of thing (a link out of the directory, a FIFO, a folder for a file) without following
// it; the seeded file is rewritten in place (its inode is the source of running boxes' mounts).
func TestPrepare(t *testing.T) {
	home, root := t.TempDir(), t.TempDir()
	p := &profile.Profile{ID: "claude", Home: []profile.HomeEntry{
		{Path: ".claude", Access: profile.AccessRW},
		{Path: ".claude.json", Access: profile.AccessState, Create: profile.CreateFile, Seed: profile.SeedClaudeConfig},
		{Path: ".claude/projects", Access: profile.AccessState, Create: profile.CreateDir},
	}}
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"theme":"light","mcpServers":{"x":{}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := Dir(root, "claude", "/w")
	if err := Prepare(dir, p, home, "/w"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ".claude.json"))
	if err != nil || !strings.Contains(string(b), `"light"`) || strings.Contains(string(b), "mcpServers") {
		t.Fatalf("seeded file: %s, %v", b, err)
	}
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(dir, ".claude.json"), &st)
	ino := st.Ino
	if err := Prepare(dir, p, home, "/w"); err != nil {
		t.Fatal(err)
	}
	syscall.Stat(filepath.Join(dir, ".claude.json"), &st)
	if st.Ino != ino {
		t.Errorf("the seeded file was replaced (inode %d → %d), not rewritten in place", ino, st.Ino)
	}

	// What a box could leave: the file a link to a host file, the folder a FIFO.
	secret := filepath.Join(home, "secret")
	os.WriteFile(secret, []byte("keep"), 0o600)
	os.Remove(filepath.Join(dir, ".claude.json"))
	if err := os.Symlink(secret, filepath.Join(dir, ".claude.json")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, ".claude", "projects"))
	if err := syscall.Mkfifo(filepath.Join(dir, ".claude", "projects"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Prepare(dir, p, home, "/w"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "keep" {
		t.Errorf("Prepare wrote through a link a box left: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(dir, ".claude.json")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("state file: %v, %v", fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, ".claude", "projects")); err != nil || !fi.IsDir() {
		t.Errorf("state folder: %v, %v", fi, err)
	}
	if Dir(root, "claude", "/w") == Dir(root, "claude", "/w2") || Dir(root, "claude", "/w") == Dir(root, "codex", "/w") {
		t.Error("two workspaces or two profiles share a state directory")
	}
}
