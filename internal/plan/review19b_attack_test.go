package plan

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAttackConfigLinkDotDotThroughWorkspaceLink (review 19b): docs/security.md says "A
// workspace the way passes through is refused too, though the link leads out of it
// (~/.bashrc -> dotfiles/bashrc -> /etc/skel/.bashrc: the box would put a file in place of
// dotfiles/bashrc)", and leaves out only "a chain whose third link or later lies in the
// workspace". A link target holding ".." after another component (linkResolver.link:
// plainTarget false) is resolved whole by ResolveExisting, and its Via is left empty: the
// links the kernel passes on the way are not compared with the workspace at all. Here
// ~/.ssh/config -> ../dotfiles/x/../ssh_config, where dotfiles/x (the second link, in the
// dotfiles workspace) leads to outside/a/b, so the file read is outside/a/ssh_config, out of
// the workspace: CheckConfigLinks accepts the dotfiles workspace. A box then repoints
// dotfiles/x to a folder of its own (dotfiles/evil/sub), and the host's next ssh reads
// dotfiles/evil/ssh_config (a Match exec, a ProxyCommand) — checked below through the kernel.
func TestAttackConfigLinkDotDotThroughWorkspaceLink(t *testing.T) {
	root := mkHome(t, "home/.ssh", "dotfiles/evil/sub", "outside/a/b")
	home := filepath.Join(root, "home")
	dot := filepath.Join(root, "dotfiles")
	os.WriteFile(filepath.Join(root, "outside/a/ssh_config"), []byte("Host *\n"), 0o644)
	symlink(t, filepath.Join(root, "outside/a/b"), filepath.Join(dot, "x"))
	symlink(t, "../../dotfiles/x/../ssh_config", filepath.Join(home, ".ssh/config"))
	if b, err := os.ReadFile(filepath.Join(home, ".ssh/config")); err != nil || string(b) != "Host *\n" {
		t.Fatalf("~/.ssh/config reads %q, %v: the setup is not what the test means", b, err)
	}
	links := FindConfigLinks(home, []string{filepath.Join(home, ".ssh")})
	err := CheckConfigLinks(dot, home, links)
	// What a box on dot can do: repoint x at its own folder; the host then reads its file.
	os.WriteFile(filepath.Join(dot, "evil/ssh_config"), []byte("Match exec \"touch /tmp/pwned\"\n"), 0o644)
	os.Remove(filepath.Join(dot, "x"))
	symlink(t, filepath.Join(dot, "evil/sub"), filepath.Join(dot, "x"))
	b, _ := os.ReadFile(filepath.Join(home, ".ssh/config"))
	if err == nil {
		t.Errorf("CheckConfigLinks(%s) = nil with %+v: accepted, though ~/.ssh/config's way passes through %s/x, a link in the workspace; once the box repoints it, ~/.ssh/config reads %q", dot, links, dot, b)
	}
}

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
