package daemon

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/plan"
)

// TestToolchainRootsInstallPrefix (review 17, F10): the parent of a bin/ or shims/ on PATH is
// bound only when it is an install prefix: a known toolchain layout (~/go, ~/.pyenv, an nvm
// version, though ~/.pyenv and ~/.nvm are git clones), or a folder in no git work tree and
// with no .env file that holds a prefix's lib/ (or share/, pkg/, …). A project's bin/ brings
// the bin/ alone; a PATH entry that is a project's top (.git or .env) brings nothing; a PATH
// entry that is a link is resolved (F1b), and so is the home.
func TestToolchainRootsInstallPrefix(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	mk := func(rel ...string) {
		for _, r := range rel {
			p := filepath.Join(home, r)
			if strings.HasSuffix(r, "/") {
				err = os.MkdirAll(p, 0o755)
			} else if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.WriteFile(p, []byte("x\n"), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("go/bin/", "go/pkg/",
		".pyenv/shims/", ".pyenv/.git/", ".pyenv/versions/",
		".nvm/.git/", ".nvm/versions/node/v20.11.0/bin/", ".nvm/versions/node/v20.11.0/lib/",
		".toolx/bin/", ".toolx/lib/",
		".local/bin/", ".local/state/",
		"work/client-a/bin/", "work/client-a/.env", "work/client-a/.git/",
		"work/mono/.git/", "work/mono/tools/bin/", "work/mono/tools/lib/",
		"work/scripts/bin/", "work/scripts/.env.local", "work/scripts/lib/",
		"work/bare/bin/",
		"work/proj/.git/",
		"dotfiles/bin/",
	)
	if err := os.Symlink("dotfiles/bin", filepath.Join(home, "bin")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "homelink")
	if err := os.Symlink("home", link); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, rel := range []string{"go", ".pyenv", ".nvm/versions/node/v20.11.0", ".toolx", ".local/bin",
		"work/client-a/bin", "work/mono/tools/bin", "work/scripts/bin", "work/bare/bin", "dotfiles/bin"} {
		want = append(want, filepath.Join(home, rel))
	}
	// $HOME as it is, and a link to it (Fedora's atomic desktops), with PATH through it.
	for _, h := range []string{home, link} {
		var path []string
		for _, rel := range []string{"go/bin", ".pyenv/shims", ".nvm/versions/node/v20.11.0/bin", ".toolx/bin", ".local/bin",
			"work/client-a/bin", "work/mono/tools/bin", "work/scripts/bin", "work/bare/bin", "work/proj", "bin", "absent/bin"} {
			path = append(path, filepath.Join(h, rel))
		}
		path = append(path, "/usr/bin", "relative/bin")
		got := toolchainRoots(h, strings.Join(path, ":"), plan.WorkspaceFacts{Home: home})
		if !reflect.DeepEqual(got, want) {
			t.Errorf("home %s: toolchainRoots =\n  %v\nwant\n  %v", h, got, want)
		}
		for _, secret := range []string{"work/client-a", "work/scripts", "work/proj"} {
			if slices.Contains(got, filepath.Join(home, secret)) {
				t.Errorf("home %s: a project's folder %s is a toolchain root", h, secret)
			}
		}
	}
}

// TestStartupFilesXDG (review 17, F6): the start-up files beneath ~/.config are also taken
// where $XDG_CONFIG_HOME moves that folder.
func TestStartupFilesXDG(t *testing.T) {
	files := startupFiles("/home/u", []string{"XDG_CONFIG_HOME=/home/u/cfg"})
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	for _, want := range []string{"/home/u/.gitconfig", "/home/u/.config/git/config", "/home/u/cfg/git/config", "/home/u/cfg/nvim/init.lua", "/home/u/.bashrc"} {
		if !slices.Contains(paths, want) {
			t.Errorf("startupFiles lacks %s: %v", want, paths)
		}
	}
	if n := len(startupFiles("/home/u", nil)); n != len(plan.HomeStartupFiles) {
		t.Errorf("startupFiles without XDG_CONFIG_HOME: %d files, want %d", n, len(plan.HomeStartupFiles))
	}
}

// TestProgramRoot: the launch's program brings its install prefix when no PATH entry under the
// home did (a pyenv shim outside the home ran alone in the box: exit 127), by the rules of a
// PATH entry's: a prefix in no git work tree and holding a prefix's folders; never one already
// brought, a system folder, the home or a folder holding it, a package cache's, a harness home,
// a project (.git above it, a .env file in it), nor the parent of a folder other than bin/ or
// shims/.
func TestProgramRoot(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	for _, d := range []string{"srv/pyenv/shims", "srv/pyenv/libexec", "srv/pyenv/versions", "proj/.git", "proj/tools/bin", "proj/tools/lib",
		"envd/bin", "envd/lib", "plain/bin", "home/.pyenv/shims", "home/.pyenv/versions", "home/.pyenv/.git", "home/.cargo/bin",
		"home/.claude/local/bin", "home/.claude/local/lib", "home/bin", "other/tool/libexec", "other/tool/lib"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "envd", ".env"), []byte("TOKEN=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	facts := plan.WorkspaceFacts{Home: home}.ResolveHarness()
	for _, c := range []struct {
		prog  string
		roots []string
		want  string
	}{
		{"srv/pyenv/shims/python3", nil, "srv/pyenv"},
		{"home/.pyenv/shims/python3", nil, "home/.pyenv"}, // run by its path, its folder not on PATH
		{"home/.pyenv/shims/python3", []string{"home/.pyenv"}, ""},
		{"proj/tools/bin/x", nil, ""},      // in a git work tree
		{"envd/bin/x", nil, ""},            // a .env beside
		{"plain/bin/x", nil, ""},           // no prefix's folder beside
		{"home/.cargo/bin/cargo", nil, ""}, // a package cache's folder (an overlay)
		{"home/.claude/local/bin/claude", nil, ""},
		{"home/bin/x", nil, ""},             // the home itself
		{"other/tool/libexec/x", nil, ""},   // not a bin/ or shims/
		{"/usr/local/bin/python3", nil, ""}, // a system folder
	} {
		prog := c.prog
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(root, prog)
		}
		var roots []string
		for _, r := range c.roots {
			roots = append(roots, filepath.Join(root, r))
		}
		want := ""
		if c.want != "" {
			want = filepath.Join(root, c.want)
		}
		if got := programRoot(home, prog, roots, facts); got != want {
			t.Errorf("programRoot(%s) = %q, want %q", c.prog, got, want)
		}
	}
}
