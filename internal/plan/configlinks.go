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
	Target string // where it leads, symlink-resolved (PathTrail's end, a dangling link too)
	// Via are the symlinks the kernel passes on the way to Target, Link first, each in its
	// folder symlink-resolved (PathTrail). A workspace holding one could replace it
	// (~/.bashrc -> dotfiles/bashrc, itself a link out of dotfiles/, which a box replaces with
	// a file of its own; ~/.ssh/config -> ../dotfiles/x/../ssh_config, dotfiles/x a link out
	// of dotfiles/, which a box repoints).
	Via []string
	// In is the configuration folder (or, with Program, the PATH folder) that holds Link (""
	// for a dot-entry of the home): no workspace is inside a configuration folder, so none is
	// inside Target either.
	In string
	// Program: In is a folder of a PATH (the launch's or the daemon's), whose entries the
	// host's shells run by name. A workspace inside where one leads is not refused (a
	// program's folder is not on the PATH), nor one holding In (CheckStartupFolders and
	// CheckHostPath decide about those: npm run's node_modules/.bin).
	Program bool
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
// folder is skipped), each with where it leads and every symlink the kernel passes on the way
// (linkResolver.trail, PathTrail's walk). A readdir tells a symlink apart without a stat of
// each entry, and only the links are resolved, each place on their ways looked at once per
// call (a dotfiles user's links mostly lead into one or two folders).
func FindConfigLinks(home string, folders []string) []ConfigLink {
	links, _ := FindLinks(home, folders, nil)
	return links
}

// FindLinks is FindConfigLinks, and beside it the symlinks among the entries of each of
// programs, the folders of a PATH (absolute; a relative one is skipped): a program linked
// from ~/.local/bin into a dotfiles repository (GNU stow) runs in place of the one its name
// meant (ConfigLink.Program). err is a folder that could not be read for another reason than
// its absence, lack of permission or not being a folder (no descriptor left, an I/O error):
// then what was found is not all there is, and the caller must not take it for an answer.
func FindLinks(home string, folders, programs []string) (out []ConfigLink, err error) {
	r := &linkResolver{seen: map[string]placeSeen{}, folders: map[string]*linkFolder{}}
	defer func() { err = r.close() }()
	if home != "" {
		home = filepath.Clean(home)
		rhome := r.end(home)
		links, _ := r.entriesIn(home)
		for _, name := range links {
			if strings.HasPrefix(name, ".") {
				out = append(out, r.configLink(home, rhome, name, "", false))
			}
		}
	}
	seen := map[string]bool{home: true}
	for i, dir := range append(append([]string(nil), folders...), programs...) {
		dir = filepath.Clean(dir)
		if !filepath.IsAbs(dir) || seen[dir] {
			continue
		}
		seen[dir] = true
		rdir := ""
		if i >= len(folders) {
			// A PATH folder read once whatever its name (/bin and /usr/bin are one folder).
			if rdir = r.end(dir); rdir != dir {
				if seen[rdir] {
					continue
				}
				seen[rdir] = true
			}
		}
		names, others := r.entriesIn(dir)
		if len(names) == 0 {
			continue
		}
		if rdir == "" {
			rdir = r.end(dir)
		} else {
			// What the readdir told of the rest saves an lstat of each link's target there
			// (python3 -> python3.11).
			for _, o := range others {
				r.seen[filepath.Join(rdir, o)] = placeSeen{exists: true}
			}
		}
		for _, name := range names {
			out = append(out, r.configLink(dir, rdir, name, dir, i >= len(folders)))
		}
	}
	return out, nil // err: the deferred close's
}

// end returns where the kernel ends reaching p (PathTrail's last place), through r.
func (r *linkResolver) end(p string) string {
	trail := r.trail(p)
	return trail[len(trail)-1]
}

// configLink is the ConfigLink of the symlink name in dir (symlink-resolved rdir), an entry of
// in ("" for the home). The readdir told it is a symlink: its target is read with no lstat.
func (r *linkResolver) configLink(dir, rdir, name, in string, program bool) ConfigLink {
	p := filepath.Join(rdir, name)
	trail := r.trail(p)
	l := ConfigLink{Link: filepath.Join(dir, name), Target: trail[len(trail)-1], In: in, Program: program}
	for _, v := range trail[:len(trail)-1] {
		if len(l.Via) == 0 || l.Via[len(l.Via)-1] != v {
			l.Via = append(l.Via, v)
		}
	}
	return l
}

// linkResolver remembers, for a call of FindLinks, what an lstat and a readlink found at each
// place (absolute, its folder symlink-resolved): with PathTrail at each link, an lstat per
// component of the link and of its target, a home of 65 links cost ~1,000 system calls
// (docs/benchmarks.md). Between calls, what it saw in each folder is kept in linkCache as long
// as the folder is unchanged (linkcache_linux.go). A nil linkResolver remembers nothing
// (PathTrail).
type linkResolver struct {
	seen map[string]placeSeen
	// folders are the folders looked into in this call: their cache entries, validated once
	// per call (nil: not cached).
	folders map[string]*linkFolder
}

// placeSeen is what is at a place: nothing, a symlink (its target), or anything else.
type placeSeen struct {
	exists, link bool
	target       string
}

// at returns what is at p, looked at once per linkResolver.
func (r *linkResolver) at(p string) placeSeen {
	if r == nil {
		v, _ := lookAt(-1, "", p)
		return v
	}
	if v, ok := r.seen[p]; ok {
		return v
	}
	v := r.folder(filepath.Dir(p)).at(filepath.Base(p), p)
	r.seen[p] = v
	return v
}

// trail is PathTrail(p), each place looked at through r.
func (r *linkResolver) trail(p string) []string {
	var trail []string
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	cur := "/"
	links := 0
	for len(parts) > 0 {
		part := parts[0]
		parts = parts[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, part)
		v := r.at(next)
		if !v.exists {
			// Absent (or unreadable): the rest is made as written.
			return append(trail, filepath.Join(append([]string{next}, parts...)...))
		}
		if !v.link || links >= maxLinks {
			cur = next
			continue
		}
		links++
		trail = append(trail, next)
		if filepath.IsAbs(v.target) {
			cur = "/"
		}
		parts = append(strings.Split(strings.Trim(v.target, "/"), "/"), parts...)
	}
	return append(trail, cur)
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
		copyOf := "the file"
		switch {
		case l.Program:
			if in := programFolder(l); in == ws || Within(in, ws) {
				continue // a PATH folder in the workspace: CheckStartupFolders' and CheckHostPath's
			}
			why = l.In + " is a folder of the launch's or the daemon's PATH: the host's shells and agentbox run " + filepath.Base(l.Link) + " from it by name, unboxed"
			copyOf = "the program"
		case l.In != "":
			why = l.In + " holds configuration or credentials that the host's programs read unboxed (an agent's hooks and MCP servers, ssh's Match exec and ProxyCommand run commands)"
		}
		hint := "work on a copy (git clone " + ws + " " + ws + "-work) and pull the reviewed change into " + ws + " yourself, or put a copy of " + copyOf + " in place of the link " + l.Link
		for _, v := range l.Via {
			if v != t && (v == ws || Within(v, ws)) {
				return &WorkspaceError{Path: ws, Why: "holds " + v + ", through which " + l.Link + " leads to " + t + ": " + why + ", so a box could put a file of its own in its place, which runs on the host before any review", Hint: hint}
			}
		}
		switch {
		case t == ws || Within(t, ws):
			return &WorkspaceError{Path: ws, Why: "holds " + what + ": " + why + ", so what a box writes there runs on the host before any review", Hint: hint}
		case l.In != "" && !l.Program && Within(ws, t) && t != "/" && t != rhome && !Within(rhome, t) && (home == "" || t != filepath.Clean(home) && !Within(home, t)):
			return &WorkspaceError{Path: ws, Why: "is inside " + what + ": " + why + ", so what a box writes there runs on the host before any review", Hint: hint}
		}
	}
	return nil
}

// programFolder returns the folder of the PATH that holds l, symlink-resolved (where l.Via
// says the kernel found the link).
func programFolder(l ConfigLink) string {
	if len(l.Via) > 0 {
		return filepath.Dir(l.Via[0])
	}
	return ResolveExisting(l.In)
}

// entriesIn returns the names of the symlinks in dir and of its other entries (none when it
// cannot be read), read once while dir is unchanged (linkCache).
func (r *linkResolver) entriesIn(dir string) (links, others []string) {
	return r.folder(dir).entries()
}

// readEntries is entriesIn's readdir of the folder open as f.
func readEntries(f *os.File) (links, others []string, err error) {
	ents, err := f.ReadDir(-1)
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 {
			links = append(links, e.Name())
		} else {
			others = append(others, e.Name())
		}
	}
	return links, others, err
}
