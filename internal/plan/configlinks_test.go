package plan

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigLinks (review 19, F3): a symlink among the home's dot-entries, or among the
// entries of a configuration folder, that leads into the workspace refuses it, naming the
// link and where it leads; one leading elsewhere does not. An entry of a configuration
// folder refuses a workspace inside where it leads too (as the folder does), except the home
// and above; a dot-entry of the home does not (a workspace inside an unlinked ~/.foo is
// accepted as well).
func TestCheckConfigLinks(t *testing.T) {
	root := mkHome(t, "home/.claude", "home/.ssh", "home/.cargo", "home/.config", "home/src/p",
		"dotfiles/claude", "dotfiles/nvim/lua", "data/proj", "data/foo/sub")
	home := filepath.Join(root, "home")
	dot := filepath.Join(root, "dotfiles")
	for _, f := range []string{"bash_aliases", "claude/settings.json", "ssh_config", "cargo.toml"} {
		if err := os.WriteFile(filepath.Join(dot, f), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	symlink(t, "../dotfiles/bash_aliases", filepath.Join(home, ".bash_aliases")) // a dot-file no list names
	symlink(t, filepath.Join(dot, "claude/settings.json"), filepath.Join(home, ".claude/settings.json"))
	symlink(t, filepath.Join(dot, "ssh_config"), filepath.Join(home, ".ssh/config"))
	symlink(t, filepath.Join(dot, "sshrc"), filepath.Join(home, ".ssh/rc"))                 // dangling: the box would make it
	symlink(t, filepath.Join(dot, "cargo.toml"), filepath.Join(home, ".cargo/config.toml")) // plan.ConfigFolders
	symlink(t, filepath.Join(dot, "nvim"), filepath.Join(home, ".config/nvim"))             // a folder entry
	symlink(t, filepath.Join(root, "data/foo"), filepath.Join(home, ".foo"))                // a dot-folder
	symlink(t, root, filepath.Join(home, ".config/up"))                                     // above the home
	links := FindConfigLinks(home, []string{filepath.Join(home, ".claude"), filepath.Join(home, ".ssh"),
		filepath.Join(home, ".cargo"), filepath.Join(home, ".config"), filepath.Join(home, ".absent"), filepath.Join(home, ".claude.json")})
	if len(links) != 8 {
		t.Fatalf("FindConfigLinks found %d links, want 8: %+v", len(links), links)
	}
	for ws, want := range map[string]string{
		dot:                                 "", // any of them: checked below
		filepath.Join(dot, "nvim"):          "holds " + filepath.Join(dot, "nvim") + ", which " + filepath.Join(home, ".config/nvim") + " leads to",
		filepath.Join(dot, "nvim/lua"):      "is inside " + filepath.Join(dot, "nvim") + ", which " + filepath.Join(home, ".config/nvim"),
		filepath.Join(dot, "claude"):        "holds " + filepath.Join(dot, "claude/settings.json") + ", which " + filepath.Join(home, ".claude/settings.json") + " leads to",
		filepath.Join(root, "data"):         "holds " + filepath.Join(root, "data/foo") + ", which " + filepath.Join(home, ".foo") + " leads to",
		filepath.Join(root, "data/foo/sub"): "-",
		filepath.Join(root, "data/proj"):    "-",
		filepath.Join(home, "src/p"):        "-",
	} {
		err := CheckConfigLinks(ws, home, links)
		switch {
		case want == "-" && err != nil:
			t.Errorf("CheckConfigLinks(%s) = %v, want nil", ws, err)
		case want != "-" && (!errors.Is(err, ErrWorkspaceRefused) || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckConfigLinks(%s) = %v, want refused saying %q", ws, err, want)
		}
	}
	// Each link alone refuses the dotfiles folder, the dangling ~/.ssh/rc too.
	for _, l := range links {
		if l.Link == filepath.Join(home, ".foo") || l.Link == filepath.Join(home, ".config/up") {
			continue
		}
		err := CheckConfigLinks(dot, home, []ConfigLink{l})
		if err == nil || !strings.Contains(err.Error(), l.Link+" leads to") || !strings.Contains(err.Error(), "put a copy of the file in place of the link") {
			t.Errorf("CheckConfigLinks(%s) with %s -> %s = %v, want refused naming the link and the fix", dot, l.Link, l.Target, err)
		}
	}
}

// TestCheckConfigLinksVia: a link whose way passes through the workspace refuses it, though
// it leads out of it (~/.bashrc -> dotfiles/bashrc -> /etc/skel/.bashrc): the box could put
// a file in place of dotfiles/bashrc, or of a folder link on the way.
func TestCheckConfigLinksVia(t *testing.T) {
	root := mkHome(t, "home", "dotfiles", "outside/d")
	home := filepath.Join(root, "home")
	dot := filepath.Join(root, "dotfiles")
	os.WriteFile(filepath.Join(root, "outside/f"), nil, 0o644)
	os.WriteFile(filepath.Join(root, "outside/d/g"), nil, 0o644)
	symlink(t, filepath.Join(root, "outside/f"), filepath.Join(dot, "bashrc"))
	symlink(t, filepath.Join(root, "outside/d"), filepath.Join(dot, "d"))
	symlink(t, filepath.Join(dot, "bashrc"), filepath.Join(home, ".bashrc"))
	symlink(t, "../dotfiles/d/g", filepath.Join(home, ".g"))
	for _, l := range FindConfigLinks(home, nil) {
		if !Within(l.Target, filepath.Join(root, "outside")) {
			t.Errorf("%s resolved to %s, want beneath outside/", l.Link, l.Target)
		}
		err := CheckConfigLinks(dot, home, []ConfigLink{l})
		if err == nil || !strings.Contains(err.Error(), "through which "+l.Link+" leads to") {
			t.Errorf("CheckConfigLinks(%s) with %s (via %v) = %v, want refused", dot, l.Link, l.Via, err)
		}
		if err := CheckConfigLinks(filepath.Join(root, "outside"), home, []ConfigLink{l}); err == nil {
			t.Errorf("CheckConfigLinks(outside) with %s = nil, want refused (it holds the target)", l.Link)
		}
	}
}

// TestResolveExistingDanglingLink: a dangling symlink is followed to where a file written
// through it is made; a start-up file linked to a file the workspace does not hold yet
// refuses it (before, ResolveExisting returned the link, and the box could make the file).
func TestResolveExistingDanglingLink(t *testing.T) {
	root := mkHome(t, "home", "dotfiles")
	home := filepath.Join(root, "home")
	symlink(t, "../dotfiles/gitconfig", filepath.Join(home, ".gitconfig"))
	symlink(t, filepath.Join(root, "dotfiles/cfg"), filepath.Join(home, ".config")) // a dangling folder link
	symlink(t, "loop", filepath.Join(home, "loop"))
	for in, want := range map[string]string{
		filepath.Join(home, ".gitconfig"):         filepath.Join(root, "dotfiles/gitconfig"),
		filepath.Join(home, ".config/git/config"): filepath.Join(root, "dotfiles/cfg/git/config"),
		filepath.Join(home, "loop"):               filepath.Join(home, "loop"),
	} {
		if got := ResolveExisting(in); got != want {
			t.Errorf("ResolveExisting(%s) = %s, want %s", in, got, want)
		}
	}
	if err := CheckStartupFiles(filepath.Join(root, "dotfiles"), HomeStartup(home)); err == nil || !strings.Contains(err.Error(), ".gitconfig leads to") {
		t.Errorf("CheckStartupFiles(dotfiles) with a dangling ~/.gitconfig into it = %v, want refused", err)
	}
}

// TestLinkResolver: FindConfigLinks' resolution of each link is ResolveExisting's, for
// relative and absolute links, through symlinked folders, with ".." after a symlinked
// component, chains of links, dangling ones and a loop.
func TestLinkResolver(t *testing.T) {
	root := mkHome(t, "home", "real/dot/sub", "real/other")
	home := filepath.Join(root, "home")
	symlink(t, "real", filepath.Join(root, "via"))
	symlink(t, "real/dot/sub", filepath.Join(root, "subl"))
	os.WriteFile(filepath.Join(root, "real/dot/f"), nil, 0o644)
	os.WriteFile(filepath.Join(root, "real/other/g"), nil, 0o644)
	for name, target := range map[string]string{
		".rel":      "../real/dot/f",
		".abs":      filepath.Join(root, "via/dot/f"),
		".dotdot":   "../subl/../f", // subl/.. is real/dot, not root
		".dotdot2":  filepath.Join(root, "subl/../f"),
		".chain":    ".rel",
		".dangling": "../via/dot/absent",
		".dangdir":  filepath.Join(root, "via/nodir/x"),
		".loop":     ".loop",
		".root":     "/",
		".up":       "..",
	} {
		symlink(t, target, filepath.Join(home, name))
	}
	links := FindConfigLinks(home, nil)
	if len(links) != 10 {
		t.Fatalf("found %d links, want 10: %+v", len(links), links)
	}
	for _, l := range links {
		if want := ResolveExisting(l.Link); l.Target != want {
			t.Errorf("%s: resolved to %s, want %s", l.Link, l.Target, want)
		}
	}
}

// TestCheckConfigLinksThirdLink (review 19b): a chain whose third link lies in the workspace
// (~/.x -> out/a -> out/b -> dotfiles/c -> out/d) refuses it: Via holds every link the
// kernel passes (before, only the first two were compared).
func TestCheckConfigLinksThirdLink(t *testing.T) {
	root := mkHome(t, "home", "dotfiles", "out")
	home := filepath.Join(root, "home")
	dot := filepath.Join(root, "dotfiles")
	os.WriteFile(filepath.Join(root, "out/d"), nil, 0o644)
	symlink(t, filepath.Join(root, "out/d"), filepath.Join(dot, "c"))
	symlink(t, filepath.Join(dot, "c"), filepath.Join(root, "out/b"))
	symlink(t, "b", filepath.Join(root, "out/a"))
	symlink(t, "../out/a", filepath.Join(home, ".x"))
	links := FindConfigLinks(home, nil)
	if len(links) != 1 || links[0].Target != filepath.Join(root, "out/d") {
		t.Fatalf("FindConfigLinks = %+v, want ~/.x -> out/d", links)
	}
	if err := CheckConfigLinks(dot, home, links); err == nil || !strings.Contains(err.Error(), "holds "+filepath.Join(dot, "c")+", through which") {
		t.Errorf("CheckConfigLinks(dotfiles) with %+v = %v, want refused naming dotfiles/c", links[0], err)
	}
}

// TestCheckProgramLinks (review 19b, F2): a program of a PATH folder linked into the
// workspace, or through a link in it, refuses it, naming the link and the fix; a workspace
// inside the folder a program link leads to is not refused (a program's folder is not on
// the PATH), nor one holding the PATH folder itself (node_modules/.bin: CheckStartupFolders'
// rule), nor one the program leads out of.
func TestCheckProgramLinks(t *testing.T) {
	root := mkHome(t, "home/.local/bin", "dotfiles/bin", "proj/node_modules/.bin", "proj/node_modules/pkg", "tools/sub", "usr/bin")
	home := filepath.Join(root, "home")
	dot := filepath.Join(root, "dotfiles")
	bin := filepath.Join(home, ".local/bin")
	os.WriteFile(filepath.Join(dot, "bin/mytool"), nil, 0o755)
	os.WriteFile(filepath.Join(root, "usr/bin/python3.11"), nil, 0o755)
	symlink(t, filepath.Join(dot, "bin/mytool"), filepath.Join(bin, "mytool"))
	symlink(t, filepath.Join(dot, "bin/absent"), filepath.Join(bin, "dangling"))
	symlink(t, filepath.Join(root, "tools"), filepath.Join(bin, "tools"))
	symlink(t, "python3.11", filepath.Join(root, "usr/bin/python3"))
	symlink(t, "../pkg/cli.js", filepath.Join(root, "proj/node_modules/.bin/cli"))
	symlink(t, "usr/bin", filepath.Join(root, "bin")) // /bin -> usr/bin: read once
	links := findLinks(t, home, nil, []string{bin, filepath.Join(root, "usr/bin"), filepath.Join(root, "proj/node_modules/.bin"), "relative/bin", filepath.Join(root, "bin")})
	if len(links) != 5 {
		t.Fatalf("FindLinks found %d links, want 5: %+v", len(links), links)
	}
	for _, l := range links {
		if !l.Program {
			t.Errorf("%s: Program false, want true", l.Link)
		}
	}
	for ws, want := range map[string]string{
		dot:                                "holds " + filepath.Join(dot, "bin/mytool") + ", which " + filepath.Join(bin, "mytool") + " leads to: " + bin + " is a folder of the launch's or the daemon's PATH",
		filepath.Join(root, "tools"):       "holds " + filepath.Join(root, "tools") + ", which " + filepath.Join(bin, "tools"),
		filepath.Join(root, "tools/sub"):   "-",
		filepath.Join(root, "proj"):        "-",
		filepath.Join(root, "usr/bin/foo"): "-",
	} {
		err := CheckConfigLinks(ws, home, links)
		switch {
		case want == "-" && err != nil:
			t.Errorf("CheckConfigLinks(%s) = %v, want nil", ws, err)
		case want != "-" && (!errors.Is(err, ErrWorkspaceRefused) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "put a copy of the program in place of the link")):
			t.Errorf("CheckConfigLinks(%s) = %v, want refused saying %q and the fix", ws, err, want)
		}
	}
}

// findLinks is FindLinks, failing the test on its error.
func findLinks(tb testing.TB, home string, folders, programs []string) []ConfigLink {
	tb.Helper()
	links, err := FindLinks(home, folders, programs)
	if err != nil {
		tb.Fatal(err)
	}
	return links
}
