package plan

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAttackHostFileHardLinkedIntoWorkspace (review 19b): plan.CheckHostFiles compares paths
// (the file, each symlink on the way, where it ends) with the workspace; a file the host reads
// that is a hard link of a file in the workspace (same inode: ln ~/dotfiles/agentbox.yaml
// ~/.config/agentbox/config.yaml, or a key file hard-linked into a project's .secrets/) passes.
// The box then reads the credential file's bytes through its own name for it, and what it
// writes in place through that name (cat > dotfiles/agentbox.yaml keeps the inode) is the
// configuration the next launch reads. docs/security.md names "a start-up file that is a hard
// link into the workspace" as not covered, but says nothing of agentbox's own configuration or
// the credential files, which the rule calls the files "a workspace may not hold". A file of
// more than one link could at least be refused or named (st_nlink > 1).
func TestAttackHostFileHardLinkedIntoWorkspace(t *testing.T) {
	root := mkHome(t, "home/.config/agentbox", "home/.keys", "dotfiles/.secrets")
	home := filepath.Join(root, "home")
	ws := filepath.Join(root, "dotfiles")
	for _, c := range []struct{ host, inWS string }{
		{filepath.Join(home, ".config/agentbox/config.yaml"), filepath.Join(ws, "agentbox.yaml")},
		{filepath.Join(home, ".keys/anthropic.key"), filepath.Join(ws, ".secrets/anthropic.key")},
	} {
		if err := os.WriteFile(c.inWS, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(c.inWS, c.host); err != nil {
			t.Fatal(err)
		}
		err := CheckHostFiles(ws, []HostFile{{StartupFile: StartupFile{Path: c.host, Why: "the agentbox daemon reads it"}, Field: "test"}})
		if err == nil {
			t.Errorf("CheckHostFiles(%s) with %s, a hard link of %s (one inode: what the box writes in place there is what the host reads) = nil, want refused", ws, c.host, c.inWS)
		}
	}
}
