package integrity_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAttackPathProgramLinkedIntoWorkspace (review 19b): fix19b refuses a workspace that a
// symlink among the home's dot-entries and configuration folders leads into, and the PATH rule
// (plan.CheckStartupFolders) a workspace that is, holds or lies inside a folder of the
// launch's PATH. A program linked one by one from a PATH folder into a dotfiles repository
// (GNU stow links each file of dotfiles/.local/bin when ~/.local/bin exists already, as it does
// once pip or pipx ran) is neither: ~/.local/bin/mytool -> ~/dotfiles/bin/mytool, ~/.local/bin
// on the launch's PATH, a launch on the dotfiles repository is accepted, the box rewrites
// bin/mytool, and the host's next `mytool` (the user's shell, by name, unboxed) runs the box's
// script. docs/security.md: a program "written there runs in place of the one its name meant"
// (the PATH folders' rule), "Configuration linked into a workspace" (the links' rule); the list
// of what is not covered names configuration files one level deeper, not the programs of a
// PATH folder. Want: refused (125), naming the link.
func TestAttackPathProgramLinkedIntoWorkspace(t *testing.T) {
	for _, folder := range []string{".local/bin", "bin"} {
		t.Run(strings.ReplaceAll(folder, "/", "_"), func(t *testing.T) {
			t.Parallel()
			e := newDaemonEnv(t)
			repo(t, e.work)
			tool := filepath.Join(e.work, "bin", "mytool")
			write(t, tool, "#!/bin/sh\necho mine\n")
			os.Chmod(tool, 0o755)
			git(t, e.work, "add", "bin/mytool")
			git(t, e.work, "commit", "-q", "-m", "mytool")
			dir := filepath.Join(e.home, folder)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(tool, filepath.Join(dir, "mytool")); err != nil {
				t.Fatal(err)
			}
			for i, v := range e.vars {
				if p, ok := strings.CutPrefix(v, "PATH="); ok {
					e.vars[i] = "PATH=" + dir + ":" + p
				}
			}
			mark, touch := e.marker("pathlink")
			out, stderr, code := e.runAll("run", "sh", "--", "-c", "printf '#!/bin/sh\\n"+touch+"\\n' > bin/mytool; echo planted")
			host := exec.Command("sh", "-c", "mytool")
			host.Env = e.vars
			host.Dir = e.root
			hostOut, _ := host.CombinedOutput()
			_, ran := os.Lstat(mark)
			t.Logf("agentbox run: exit %d\n%s%s\nthe host's mytool: %q (marker made: %v)", code, out, stderr, hostOut, ran == nil)
			if all := out + stderr; code != 125 || !strings.Contains(all, "workspace_refused") {
				t.Errorf("a launch on %s, which %s/mytool (on the launch's PATH) leads into, was accepted (exit %d); the host's next mytool ran the box's script: %v", e.work, dir, code, ran == nil)
			}
		})
	}
}
