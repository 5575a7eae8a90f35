package plan

import (
	"os"
	"path/filepath"
	"strings"
)

// ConfigLink is a symlink among the host's configuration: a dot-entry at the top of the home
// (~/.bash_aliases -> dotfiles/bash_aliases), or any entry of a configuration folder
// (~/.claude/settings.json, ~/.codex/config.toml, ~/.ssh/config, ~/.config/pip, …).
type ConfigLink struct {
	Link   string // the symlink, absolute, as the host's programs name it
	Target string // where it leads, symlink-resolved (ResolveExisting, a dangling link too)
	// Via are paths the kernel passes on the way to Target (one may be Target): what the link
	// says (its folders not resolved), and that path with its folder resolved. A workspace
	// holding one that is not Target could replace it (~/.bashrc -> dotfiles/bashrc, itself a link out
	// of dotfiles/, which a box replaces with a file of its own).
	Via []string
	// In is the configuration folder that holds Link ("" for a dot-entry of the home): no
	// workspace is inside such a folder, so none is inside Target either.
	In string
}

// ConfigFolders are home-relative folders, beside the harness homes (HarnessHomes and the
// profiles'), whose entries other programs of the host read, and run commands from, at
// their start: a symlink among them leading into a workspace is refused as a harness
// home's is (FindConfigLinks). Files linked one level deeper than the home's dot-entries
// and these folders' entries are not found.
var ConfigFolders = []string{
	".cargo",                    // config.toml: cargo's build.rustc-wrapper, target runners, aliases
	".config/systemd/user",      // systemd --user runs its units at login
	".config/autostart",         // the desktop session runs them at login
	".config/environment.d",     // systemd --user's environment (PATH, LD_PRELOAD) at login
	".config/pip",               // pip.conf: an index URL, build settings
	".config/containers",        // podman's configuration (hooks, runtimes)
	".config/git",               // git's configuration (also in HomeStartupFiles)
	".config/fish",              // fish's start-up files
	".config/nvim",              // neovim's
	".config/tmux",              // tmux's
	".local/share/applications", // desktop entries, whose Exec the session runs
}

// FindConfigLinks returns the symlinks among the home's dot-entries (one readdir of home) and
// among the entries of each of folders (absolute; a readdir each; one that is absent or no
// folder is skipped), each with where it leads. A readdir tells a symlink apart without a
// stat of each entry, and only the links are resolved, each with one readlink and one lstat
// where it leads, the folders it leads into resolved once per call (linkResolver).
func FindConfigLinks(home string, folders []string) []ConfigLink {
	var out []ConfigLink
	r := linkResolver{}
	if home != "" {
		home = filepath.Clean(home)
		rhome := r.dir(home)
		for _, name := range symlinksIn(home) {
			if strings.HasPrefix(name, ".") {
				t, via := r.link(rhome, name)
				out = append(out, ConfigLink{Link: filepath.Join(home, name), Target: t, Via: via})
			}
		}
	}
	seen := map[string]bool{}
	for _, dir := range folders {
		dir = filepath.Clean(dir)
		if !filepath.IsAbs(dir) || seen[dir] || dir == home {
			continue
		}
		seen[dir] = true
		names := symlinksIn(dir)
		if len(names) == 0 {
			continue
		}
		rdir := r.dir(dir)
		for _, name := range names {
			t, via := r.link(rdir, name)
			out = append(out, ConfigLink{Link: filepath.Join(dir, name), Target: t, Via: via, In: dir})
		}
	}
	return out
}

// linkResolver resolves symlinks as ResolveExisting does, the folders they lead into
// resolved once (a dotfiles user's links mostly lead into one or two folders): with
// ResolveExisting at each link, an lstat per component of the link and of its target, a home
// of 65 links cost ~1,000 lstats (docs/benchmarks.md).
type linkResolver map[string]string

// dir returns ResolveExisting(d) (d absolute and clean), once per d: its folder's resolved
// (dir), then one lstat of d there.
func (r linkResolver) dir(d string) string {
	if v, ok := r[d]; ok {
		return v
	}
	parent := filepath.Dir(d)
	v := d
	if parent != d {
		v = filepath.Join(r.dir(parent), filepath.Base(d))
		if fi, err := os.Lstat(v); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			v = ResolveExisting(v)
		}
	}
	r[d] = v
	return v
}

// link returns ResolveExisting of the entry name of the folder rdir (symlink-resolved): its
// link read, and where it leads resolved as its folder (dir) and its last component (an
// lstat: a link again is resolved whole); and the paths on the way (ConfigLink.Via). A target
// with ".." after another component is resolved whole too: ".." is taken where the component
// before it leads, which the lexical join would not do.
func (r linkResolver) link(rdir, name string) (string, []string) {
	p := filepath.Join(rdir, name)
	t, err := os.Readlink(p)
	if err != nil {
		return ResolveExisting(p), nil
	}
	if !filepath.IsAbs(t) {
		t = rdir + "/" + t
	}
	if !plainTarget(t, rdir) {
		return ResolveExisting(p), nil
	}
	t = filepath.Clean(t)
	if t == "/" {
		return t, nil
	}
	q := filepath.Join(r.dir(filepath.Dir(t)), filepath.Base(t))
	via := []string{t}
	if q != t {
		via = append(via, q)
	}
	if fi, err := os.Lstat(q); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return ResolveExisting(q), via
	}
	return q, via
}

// plainTarget reports whether t (absolute) holds a ".." only right after the prefix rdir (a
// folder with no symlink left in it, where ".." is lexical) or none.
func plainTarget(t, rdir string) bool {
	rest := t
	if strings.HasPrefix(t, rdir+"/") {
		rest = strings.TrimLeft(t[len(rdir)+1:], "/")
		for strings.HasPrefix(rest, "../") || rest == ".." {
			rest = strings.TrimLeft(strings.TrimPrefix(rest, ".."), "/")
		}
	}
	for _, c := range strings.Split(rest, "/") {
		if c == ".." {
			return false
		}
	}
	return true
}

// CheckConfigLinks reports why ws (absolute, symlink-resolved) must not be a workspace because
// one of links (FindConfigLinks) leads into it, or nil: a box writes its workspace, and the
// host's programs read their configuration through the link at their next start, unboxed and
// with no review (review 19, F3: ~/.claude/settings.json, ~/.codex/config.toml and
// ~/.ssh/config linked into a dotfiles workspace were rewritten by a plain box, with a
// SessionStart hook, an MCP server and a Match exec, for the host's next claude, codex and
// ssh). No workspace holds the home, so none holds what a dot-entry of it is; no workspace is,
// is inside or holds a harness home, so none holds what an entry of one leads to, nor (for an
// entry of a configuration folder, In) is inside it. "/", the home and the folders above it
// are never "inside": CheckWorkspace refuses them.
func CheckConfigLinks(ws, home string, links []ConfigLink) error {
	ws = filepath.Clean(ws)
	rhome := ""
	if home != "" {
		rhome = ResolveExisting(home)
	}
	for _, l := range links {
		t := filepath.Clean(l.Target)
		what := t + ", which " + l.Link + " leads to"
		why := "the host's programs read their configuration from the home's dot-files and dot-folders at their start"
		if l.In != "" {
			why = l.In + " holds configuration or credentials that the host's programs read unboxed (an agent's hooks and MCP servers, ssh's Match exec and ProxyCommand run commands)"
		}
		hint := "work on a copy (git clone " + ws + " " + ws + "-work) and pull the reviewed change into " + ws + " yourself, or put a copy of the file in place of the link " + l.Link
		for _, v := range l.Via {
			if v != t && (v == ws || Within(v, ws)) {
				return &WorkspaceError{Path: ws, Why: "holds " + v + ", through which " + l.Link + " leads to " + t + ": " + why + ", so a box could put a file of its own in its place, which runs on the host before any review", Hint: hint}
			}
		}
		switch {
		case t == ws || Within(t, ws):
			return &WorkspaceError{Path: ws, Why: "holds " + what + ": " + why + ", so what a box writes there runs on the host before any review", Hint: hint}
		case l.In != "" && Within(ws, t) && t != "/" && t != rhome && !Within(rhome, t) && (home == "" || t != filepath.Clean(home) && !Within(home, t)):
			return &WorkspaceError{Path: ws, Why: "is inside " + what + ": " + why + ", so what a box writes there runs on the host before any review", Hint: hint}
		}
	}
	return nil
}

// symlinksIn returns the names of the symlinks in dir (none when it cannot be read).
func symlinksIn(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	ents, _ := f.ReadDir(-1)
	var out []string
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 {
			out = append(out, e.Name())
		}
	}
	return out
}
