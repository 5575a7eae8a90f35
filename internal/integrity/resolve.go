package integrity

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/plan"
)

// Placeholder is a mount point created on the host for an absent protected path, so that the
// box cannot create it: it exists only while a box on the workspace runs.
type Placeholder struct {
	Path string `json:"path"`
	Dir  bool   `json:"dir"`
	// Content is a file placeholder's content: one that host tools accept (an empty commondir
	// makes git fatal, "." works; JSON settings get "{}").
	Content string `json:"content,omitempty"`
	// Beneath is the workspace the placeholder is created beneath (no symlink is followed).
	Beneath string `json:"beneath"`
	// Private makes it 0600 (a folder 0700), as a harness home's files are: a host program that
	// later writes its credential into the placeholder in place keeps the mode it finds.
	Private bool `json:"private,omitempty"`
}

// Layout is what Resolve found for one workspace.
type Layout struct {
	Workspace string
	// Protected are bound read-only in the box (plan.ProtectMounts); placeholders included.
	Protected []plan.Protected
	// Placeholders must exist before the box starts (Registry.Prepare).
	Placeholders []Placeholder
	// Roots are what the watch snapshots and verifies.
	Roots []Root
	// Notes are protected paths that could not be pinned, and why (reported at launch).
	Notes []string
}

// placeholderContent is the content of a file placeholder, by base name.
var placeholderContent = map[string]string{
	"commondir":           ".\n",
	".mcp.json":           "{}\n",
	"settings.json":       "{}\n",
	"settings.local.json": "{}\n",
	"tasks.json":          "{}\n",
}

// contentOf returns the content of a file placeholder at path: by base name, else "{}" for
// any JSON file (opencode.json, opencode.jsonc, a program's *.json settings), else empty.
func contentOf(path string) string {
	base := filepath.Base(path)
	if c, ok := placeholderContent[base]; ok {
		return c
	}
	if ext := filepath.Ext(base); ext == ".json" || ext == ".jsonc" {
		return "{}\n"
	}
	return ""
}

// Watch adds paths (absolute, outside the workspace: a profile's protected home entries,
// bound read-only by the profile) to the integrity roots: they are snapshotted and verified,
// never placeholdered (Resolve's protected paths already are roots and are skipped).
func (l *Layout) Watch(paths ...string) {
	seen := map[string]bool{}
	for _, r := range l.Roots {
		seen[r.Path] = true
	}
	for _, p := range paths {
		if p = filepath.Clean(p); !filepath.IsAbs(p) || seen[p] {
			continue
		}
		seen[p] = true
		l.Roots = append(l.Roots, Root{Path: p, Alert: true})
	}
}

// maxGitDirs bounds the git directories (the workspace's and its submodules') protected.
const maxGitDirs = 64

type resolver struct {
	ws     string
	lay    *Layout
	prot   map[string]bool
	ph     map[string]bool // planned placeholders: true for a folder
	roots  map[string]bool
	gitdir int
	fs     beneathFS
}

// beneathFS looks paths up beneath the workspace without following symlinks (Linux: openat2).
type beneathFS interface {
	// kind returns the kind of ws/rel without following any symlink (KindAbsent when a
	// component is missing), or an error (a symlink on the way: ELOOP).
	kind(rel string) (string, error)
	// follow resolves ws/rel following symlinks, but only beneath ws; it returns the path.
	follow(rel string) (string, error)
	// read returns up to max bytes of the regular file ws/rel, following symlinks only
	// beneath ws.
	read(rel string, max int64) ([]byte, error)
}

func (r *resolver) root(path string, alert, shallow bool) {
	if r.roots[path] {
		return
	}
	r.roots[path] = true
	r.lay.Roots = append(r.lay.Roots, Root{Path: path, Alert: alert, Shallow: shallow})
}

func (r *resolver) pin(path string) {
	if r.prot[path] {
		return
	}
	r.prot[path] = true
	r.lay.Protected = append(r.lay.Protected, plan.Protected{Path: path, Beneath: r.ws})
}

func (r *resolver) note(format string, a ...any) {
	r.lay.Notes = append(r.lay.Notes, sprintf(format, a...))
}

// protect pins ws/rel: an existing file or folder is bound read-only; an absent one gets a
// placeholder at its topmost missing component; a symlink's target is pinned when it stays
// beneath the workspace.
func (r *resolver) protect(rel string, wantDir bool) {
	abs := filepath.Join(r.ws, rel)
	r.root(abs, true, false)
	k, err := r.fs.kind(rel)
	switch {
	case err != nil:
		r.note("%s lies behind a symlink or cannot be read (%v): watched, not pinned", abs, err)
	case k == KindFile || k == KindDir:
		r.pin(abs)
	case k == KindSymlink:
		target, err := r.fs.follow(rel)
		if err != nil || !within(target, r.ws) || target == r.ws {
			r.note("%s is a symlink leading outside the workspace (or nowhere): watched, not pinned", abs)
			return
		}
		r.note("%s is a symlink: its target %s is pinned, the link itself is only watched", abs, target)
		r.root(target, true, false)
		r.pin(target)
	case k == KindAbsent:
		parts := strings.Split(rel, "/")
		for i := 1; i <= len(parts); i++ {
			prefix := strings.Join(parts[:i], "/")
			pk, err := r.fs.kind(prefix)
			if err != nil {
				r.note("%s lies behind a symlink (%v): watched, not pinned", abs, err)
				return
			}
			if pk != KindAbsent {
				continue
			}
			p := filepath.Join(r.ws, prefix)
			if dir, planned := r.ph[p]; planned {
				// A protected folder's placeholder holds placeholders for the protected paths
				// beneath it, so that each exists in the box: OpenCode 1.18 writes
				// .opencode/.gitignore unless it exists, and fails to start when .opencode/
				// is read-only. A folder that is only on the way to one stays empty.
				if dir && r.roots[p] {
					continue
				}
				return
			}
			dir := i < len(parts) || wantDir
			r.ph[p] = dir
			ph := Placeholder{Path: p, Dir: dir, Beneath: r.ws}
			if !dir {
				ph.Content = contentOf(p)
			}
			r.lay.Placeholders = append(r.lay.Placeholders, ph)
			r.pin(p)
			return
		}
	default:
		r.note("%s is neither a file nor a folder: watched, not pinned", abs)
	}
}

// gitDir protects a git directory (relative to the workspace), its linked worktrees' gitdirs
// and its submodules' gitdirs; first are the names of submodules listed first (a gitdir is
// modules/<name>), so that decoy gitdirs a box made cannot push them over the bound.
func (r *resolver) gitDir(rel string, first []string) {
	r.gitdir++
	if r.gitdir > maxGitDirs {
		r.note("more than %d git directories: %s and later ones are not pinned (the workspace scan moves aside hooks and configuration a box writes there)", maxGitDirs, filepath.Join(r.ws, rel))
		return
	}
	for _, p := range plan.GitDirProtected {
		r.protect(filepath.Join(rel, p), slices.Contains(plan.ProtectedDirs, filepath.Base(p)))
	}
	for _, p := range plan.GitDirWatched {
		r.root(filepath.Join(r.ws, rel, p), false, false)
	}
	r.worktrees(rel)
	r.modules(filepath.Join(rel, "modules"), 0, first)
}

// worktrees protects the gitdirs of linked worktrees (gitdir/worktrees/<name>): what points to
// the common dir, the pointer back to the worktree and the worktree's own configuration.
func (r *resolver) worktrees(rel string) {
	dir := filepath.Join(rel, "worktrees")
	if k, err := r.fs.kind(dir); err != nil || k != KindDir {
		return
	}
	names, err := readDirNames(filepath.Join(r.ws, dir))
	if err != nil {
		return
	}
	for _, n := range names {
		wt := filepath.Join(dir, n)
		if k, err := r.fs.kind(wt); err != nil || k != KindDir {
			continue
		}
		r.gitdir++
		if r.gitdir > maxGitDirs {
			r.note("more than %d git directories: %s and later ones are not pinned", maxGitDirs, filepath.Join(r.ws, wt))
			return
		}
		for _, p := range plan.WorktreeGitDirProtected {
			r.protect(filepath.Join(wt, p), false)
		}
	}
}

// isGitDir reports whether the folder rel holds anything that makes a git directory (see
// looksLikeGitDir): HEAD of any kind, config, objects, refs or commondir.
func (r *resolver) isGitDir(rel string) bool {
	for _, n := range []string{"HEAD", "config", "objects", "refs", "commondir"} {
		if k, err := r.fs.kind(filepath.Join(rel, n)); err == nil && k != KindAbsent {
			return true
		}
	}
	return false
}

// modules protects the gitdirs of submodules (gitdir/modules/<name>[/…], nested): the names
// of first before the others.
func (r *resolver) modules(rel string, depth int, first []string) {
	if depth > 4 {
		return
	}
	if k, err := r.fs.kind(rel); err != nil || k != KindDir {
		return
	}
	names, err := readDirNames(filepath.Join(r.ws, rel))
	if err != nil {
		return
	}
	done := map[string]bool{}
	for _, n := range first {
		sub := filepath.Join(rel, n)
		if !within(sub, rel) || sub == rel || done[sub] {
			continue
		}
		done[sub] = true
		if k, err := r.fs.kind(sub); err == nil && k == KindDir && r.isGitDir(sub) {
			r.gitDir(sub, nil)
		}
	}
	for _, n := range names {
		sub := filepath.Join(rel, n)
		if done[sub] {
			continue
		}
		if k, err := r.fs.kind(sub); err != nil || k != KindDir {
			continue
		}
		if r.isGitDir(sub) {
			r.gitDir(sub, nil)
			continue
		}
		r.modules(sub, depth+1, nil) // a submodule named "a/b"
	}
}

// maxIncludes bounds how deep include.path is followed (git's own bound is 10).
const maxIncludes = 10

// fromConfig pins what the configuration of gitdir (relative) makes git run from the
// worktree top (relative): the files include.path and includeIf.*.path name beneath the
// workspace (whatever the condition, and while absent too: a box must not create one), and
// every folder core.hooksPath names, in the repository's configuration or the user's (a
// relative hooksPath in ~/.gitconfig is each repository's folder); with husky's .husky/_,
// .husky too: its hooks run .husky/<hook>. The repository's configuration is pinned itself,
// so what it says is the user's.
func (r *resolver) fromConfig(gitdir, top string) {
	var entries []ConfigEntry
	for _, p := range userGitConfigs() {
		if b, err := os.ReadFile(p); err == nil {
			entries = append(entries, ParseConfig(b)...)
		}
	}
	var read func(rel string, depth int)
	read = func(rel string, depth int) {
		b, err := r.fs.read(rel, 1<<20)
		if err != nil {
			return
		}
		es := ParseConfig(b)
		entries = append(entries, es...)
		for _, inc := range includePaths(es) {
			p, ok := r.configPath(inc, filepath.Join(r.ws, filepath.Dir(rel)))
			if !ok {
				continue
			}
			if depth >= maxIncludes {
				r.note("%s: includes nested deeper than %d are not followed", filepath.Join(r.ws, rel), maxIncludes)
				continue
			}
			irel, _ := filepath.Rel(r.ws, p)
			r.protect(irel, false)
			read(irel, depth+1)
		}
	}
	for _, f := range GitDirConfigFiles {
		read(filepath.Join(gitdir, f), 0)
	}
	for _, e := range entries {
		if e.Section != "core" || e.Sub != "" || e.Key != "hookspath" {
			continue
		}
		p, ok := r.configPath(e.Value, filepath.Join(r.ws, top))
		if !ok {
			continue
		}
		rel, _ := filepath.Rel(r.ws, p)
		r.protect(rel, true)
		if filepath.Base(rel) == "_" && filepath.Base(filepath.Dir(rel)) == ".husky" {
			r.protect(filepath.Dir(rel), true)
		}
	}
}

// userGitConfigs are the configuration files of the host's git outside the repository: the
// system's, the user's XDG one and ~/.gitconfig.
func userGitConfigs() []string {
	out := []string{"/etc/gitconfig"}
	xdg := os.Getenv("XDG_CONFIG_HOME")
	home, _ := os.UserHomeDir()
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	if xdg != "" {
		out = append(out, filepath.Join(xdg, "git", "config"))
	}
	if home != "" {
		out = append(out, filepath.Join(home, ".gitconfig"))
	}
	return out
}

// configPath resolves a path value of git configuration (relative to base) and reports
// whether it lies strictly beneath the workspace; "~" paths (the home folder) do not.
func (r *resolver) configPath(v, base string) (string, bool) {
	if v == "" || strings.HasPrefix(v, "~") {
		return "", false
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(base, v)
	}
	v = filepath.Clean(v)
	return v, within(v, r.ws) && v != r.ws
}

// submodules returns the names of the submodules .gitmodules lists, and pins each one's .git
// file (its gitdir pointer) where it is present.
func (r *resolver) submodules() []string {
	b, err := r.fs.read(".gitmodules", 1<<20)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ParseConfig(b) {
		if e.Section != "submodule" || e.Sub == "" || e.Key != "path" {
			continue
		}
		names = append(names, e.Sub)
		p, ok := r.configPath(e.Value, r.ws)
		if !ok {
			continue
		}
		rel, _ := filepath.Rel(r.ws, filepath.Join(p, ".git"))
		if k, err := r.fs.kind(rel); err == nil && k == KindFile {
			r.protect(rel, false)
		}
	}
	return names
}

// resolveWith is Resolve over fs.
func resolveWith(ws string, extra []string, fs beneathFS) *Layout {
	r := &resolver{ws: ws, lay: &Layout{Workspace: ws}, prot: map[string]bool{}, ph: map[string]bool{}, roots: map[string]bool{}, fs: fs}
	rels := plan.ProtectedPaths(ws, extra)
	dirs := plan.ProtectedDirPaths(ws, extra)
	for _, g := range plan.WorkspaceProtectedGlobs {
		matches, _ := filepath.Glob(filepath.Join(ws, g))
		for _, m := range matches {
			if rel, err := filepath.Rel(ws, m); err == nil && !slices.Contains(rels, rel) {
				rels = append(rels, rel)
			}
		}
	}
	slices.Sort(rels)
	for _, rel := range rels {
		if rel != ".git" {
			r.protect(rel, dirs[rel])
			continue
		}
		k, err := fs.kind(".git")
		dotGit := filepath.Join(ws, ".git")
		switch {
		case err == nil && k == KindDir:
			r.root(dotGit, true, true)
			r.gitDir(".git", r.submodules())
			r.fromConfig(".git", ".")
		case err == nil && k == KindFile:
			r.protect(".git", false)
			gd, ok := readGitdir(dotGit)
			switch {
			case !ok:
				r.note("%s is a file without a gitdir line: pinned and watched", dotGit)
			case !within(gd, ws) || gd == ws:
				r.note("%s points to %s, outside the workspace: never bound (git in the box cannot reach it)", dotGit, gd)
			default:
				rel, _ := filepath.Rel(ws, gd)
				if k, err := fs.kind(rel); err != nil || k != KindDir {
					r.note("%s points to %s, which is not a directory beneath the workspace: not bound", dotGit, gd)
					break
				}
				r.root(gd, true, true)
				r.gitDir(rel, r.submodules())
				r.fromConfig(rel, ".")
			}
		default:
			r.protect(".git", true)
		}
	}
	return r.lay
}

// ExcludeFile is the name, in the launch's run directory, of the git exclude file that hides
// the placeholders from git in the box (see GitExclude).
const ExcludeFile = "integrity.exclude"

// GitExclude returns the lines of a git exclude file (core.excludesFile) that make git in the
// box ignore the workspace's file placeholders, so that "git add -A" never commits one; ""
// when there is none. Placeholder folders are empty, and git does not list empty folders.
func GitExclude(lay *Layout) string {
	var b strings.Builder
	for _, ph := range lay.Placeholders {
		rel, err := filepath.Rel(lay.Workspace, ph.Path)
		if err != nil || ph.Dir || rel == ".git" || strings.HasPrefix(rel, ".git/") {
			continue
		}
		b.WriteString("/" + rel + "\n")
	}
	return b.String()
}

// GitExcludeEnv is the environment that points git in the box at the exclude file under
// plan.RunDir (git's command-line configuration level, which no repository file overrides).
func GitExcludeEnv() []string {
	return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.excludesFile",
		"GIT_CONFIG_VALUE_0=" + plan.RunDir + "/" + ExcludeFile}
}
