package plan

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mkHome returns a fresh home folder (symlink-resolved) holding dirs.
func mkHome(t *testing.T, dirs ...string) string {
	t.Helper()
	home, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestCheckWorkspaceSymlinkedHome (review 17, F2): the daemon passes the home resolved
// (ResolveExisting), as the workspace is; then ~/.ssh, the home itself and a harness home
// that is a link into a project (~/.config -> dotfiles/config) are refused whatever way $HOME
// reaches them.
func TestCheckWorkspaceSymlinkedHome(t *testing.T) {
	root := mkHome(t, "real/.ssh", "real/dotfiles/config/git", "real/src/p")
	link := filepath.Join(root, "homelink")
	symlink(t, "real", link)
	symlink(t, "dotfiles/config", filepath.Join(root, "real", ".config"))
	f := WorkspaceFacts{Home: ResolveExisting(link)}
	if f.Home != filepath.Join(root, "real") {
		t.Fatalf("ResolveExisting(%s) = %s", link, f.Home)
	}
	for ws, want := range map[string]string{
		filepath.Join(root, "real"):                        "is your home directory",
		filepath.Join(root, "real", ".ssh"):                "holds credentials",
		filepath.Join(root, "real", "dotfiles"):            "contains " + filepath.Join(root, "real", ".config") + " (which leads to",
		filepath.Join(root, "real", "dotfiles/config/git"): "is inside",
		filepath.Join(root, "real", "src/p"):               "",
	} {
		// Resolved at each call, and once (ResolveHarness, as the daemon's facts are).
		for _, f := range []WorkspaceFacts{f, f.ResolveHarness()} {
			err := CheckWorkspace(ws, f)
			switch {
			case want == "" && err != nil:
				t.Errorf("CheckWorkspace(%s) = %v, want nil", ws, err)
			case want != "" && (!errors.Is(err, ErrWorkspaceRefused) || !strings.Contains(err.Error(), want)):
				t.Errorf("CheckWorkspace(%s) = %v, want refused saying %q", ws, err, want)
			}
		}
	}
}

// TestCheckStartupFoldersResolved (review 17, F1b, F2): PATH entries and the start-up folders
// are compared resolved: $HOME a link, ~/bin a link into a dotfiles repository, a PATH entry
// that is a link to the workspace.
func TestCheckStartupFoldersResolved(t *testing.T) {
	root := mkHome(t, "real/dotfiles/bin", "real/.vim", "real/proj", "real/src/p")
	home := filepath.Join(root, "real")
	link := filepath.Join(root, "homelink")
	symlink(t, "real", link)
	symlink(t, "dotfiles/bin", filepath.Join(home, "bin"))
	symlink(t, "real/proj", filepath.Join(root, "projlink"))
	path := []string{filepath.Join(link, "bin"), filepath.Join(root, "projlink"), "/usr/bin"}
	for ws, want := range map[string]string{
		filepath.Join(home, ".vim"):     "vim runs its plugins",
		filepath.Join(home, "dotfiles"): filepath.Join(home, "dotfiles", "bin"), // the PATH rule (it comes first) or the ~/bin one
		filepath.Join(home, "proj"):     "is on your PATH",
		filepath.Join(home, "src/p"):    "",
	} {
		// The home as $HOME says it: CheckStartupFolders resolves what it compares.
		err := CheckStartupFolders(ws, link, path)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckStartupFolders(%s) = %v, want nil", ws, err)
		case want != "" && (!errors.Is(err, ErrWorkspaceRefused) || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckStartupFolders(%s) = %v, want refused saying %q", ws, err, want)
		}
	}
}

// TestCheckStartupFiles (review 17, F6): a workspace holding what a start-up file of the home
// leads to (~/.gitconfig -> dotfiles/gitconfig, ~/.bashrc -> dotfiles/shell/bashrc) is refused,
// naming the link and the file; a dotfiles repository the home does not link into, a plain
// ~/.gitconfig and a workspace inside the folder a start-up file lies in are not.
func TestCheckStartupFiles(t *testing.T) {
	home := mkHome(t, "dotfiles/shell", "stow/vim", "plain", "src/p")
	for _, f := range []string{"dotfiles/gitconfig", "dotfiles/shell/bashrc", "stow/vim/vimrc", ".profile"} {
		if err := os.WriteFile(filepath.Join(home, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	symlink(t, "dotfiles/gitconfig", filepath.Join(home, ".gitconfig"))
	symlink(t, "dotfiles/shell/bashrc", filepath.Join(home, ".bashrc"))
	symlink(t, "stow/vim/vimrc", filepath.Join(home, ".vimrc"))
	files := HomeStartup(home)
	for ws, want := range map[string]string{
		filepath.Join(home, "dotfiles"):       "holds " + filepath.Join(home, "dotfiles", "gitconfig") + ", which " + filepath.Join(home, ".gitconfig") + " leads to: git reads it",
		filepath.Join(home, "dotfiles/shell"): "which " + filepath.Join(home, ".bashrc") + " leads to: bash runs it",
		filepath.Join(home, "stow"):           "vim runs it",
		filepath.Join(home, "plain"):          "",
		filepath.Join(home, "src/p"):          "",
	} {
		err := CheckStartupFiles(ws, files)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckStartupFiles(%s) = %v, want nil", ws, err)
		case want != "" && (!errors.Is(err, ErrWorkspaceRefused) || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckStartupFiles(%s) = %v, want refused saying %q", ws, err, want)
		}
	}
	// A git hooks folder named by the daemon (absolute), which does not exist yet: the box
	// could make it.
	extra := []StartupFile{{Path: filepath.Join(home, "src/p/hooks"), Why: "git reads it at every start"}}
	if err := CheckStartupFiles(filepath.Join(home, "src"), extra); !errors.Is(err, ErrWorkspaceRefused) {
		t.Errorf("CheckStartupFiles(~/src) holding the place of git's hooks folder = %v, want refused", err)
	}
}

// TestResolveExisting: the leading part that exists is resolved, the rest kept as written.
func TestResolveExisting(t *testing.T) {
	root := mkHome(t, "real/a")
	symlink(t, "real", filepath.Join(root, "l"))
	for in, want := range map[string]string{
		filepath.Join(root, "l"):          filepath.Join(root, "real"),
		filepath.Join(root, "l/a"):        filepath.Join(root, "real/a"),
		filepath.Join(root, "l/a/none/x"): filepath.Join(root, "real/a/none/x"),
		filepath.Join(root, "l/../l/a/"):  filepath.Join(root, "real/a"),
		"/nonexistent-r17/x":              "/nonexistent-r17/x",
	} {
		if got := ResolveExisting(in); got != want {
			t.Errorf("ResolveExisting(%s) = %s, want %s", in, got, want)
		}
	}
}

// BenchmarkCheckWorkspace: one CheckWorkspace of a project folder under /tmp with the
// machine's own home, the harness homes symlink-resolved at each call, or once
// (ResolveHarness, as the daemon's facts are) (docs/benchmarks.md).
func BenchmarkCheckWorkspace(b *testing.B) {
	home, _ := os.UserHomeDir()
	f := WorkspaceFacts{Home: ResolveExisting(home), Harness: []string{".cache/tool"}}
	for _, c := range []struct {
		name string
		f    WorkspaceFacts
	}{{"each-call", f}, {"resolved-once", f.ResolveHarness()}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				CheckWorkspace("/tmp/project/x", c.f)
			}
		})
	}
}
