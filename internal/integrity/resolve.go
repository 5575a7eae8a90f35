package integrity

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/plan"
)

// Placeholder is a mount point created on the host for an absent protected home entry (a
// profile's ro or deny entry beneath an rw one), so that the box cannot create it: it exists
// only while a box that needs it runs (Registry.Hold). Absent protected paths of a workspace
// get no placeholder: they are guarded (Layout.Guards).
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
	// Protected are bound read-only in the box (plan.ProtectMounts): the protected paths that
	// exist.
	Protected []plan.Protected
	// Guards are the protected paths that are absent: the box may create them, and what it
	// creates is moved into the launch's proposed changes (plan.Guard). Nothing is created on
	// the host for them.
	Guards []plan.Guard
	// Roots are what the watch snapshots and verifies.
	Roots []Root
	// Notes are protected paths that could not be pinned, and why (reported at launch).
	Notes []string
	// Config are the workspace configuration files of the launch's programs
	// (ProfileConfigFiles of the profiles in force: the built-in ones and the user's), which the
	// workspace scan looks for in every folder as it does NestedConfigFiles; nil means
	// NestedConfigFiles only.
	Config []NestedConfigFile
	// NoRepository says the workspace was in no repository at launch (no .git at its top, nor
	// a .git or HEAD in any folder above: surelyNoRepository): its .git is not guarded, and a
	// repository the box makes there is the box's, under the nested repositories' rule
	// (State.NoRepository).
	NoRepository bool
	// EnvrcWhitelisted says direnv's configuration whitelists a prefix holding the workspace
	// (or one inside it): direnv runs any .envrc there without an allow, so the scan moves a
	// new or changed one aside rather than only reporting it (subEnvrcs).
	EnvrcWhitelisted bool
	// PathDirs are the workspace-relative folders the top's protected .envrc puts on PATH
	// (PATH_add DIR, path_add PATH DIR: envrcPathDirs), whose new or changed entries the check
	// at exit takes into the proposed changes (State.PathDirs).
	PathDirs []string
}

// Watch adds paths (absolute, outside the workspace: a profile's protected home entries,
// bound read-only by the profile) to the integrity roots: they are snapshotted and verified,
// never placeholdered (Resolve's protected paths already are roots and are skipped).
func (l *Layout) Watch(paths ...string) { l.addRoots(true, paths) }

// Track adds paths (absolute: the workspace's instruction files, writable in the box) to the
// integrity roots as watched-only roots, like HEAD: what the launch changes in them is recorded
// without raising the drift flag, and listed at exit.
func (l *Layout) Track(paths ...string) { l.addRoots(false, paths) }

func (l *Layout) addRoots(alert bool, paths []string) {
	seen := map[string]bool{}
	for _, r := range l.Roots {
		seen[r.Path] = true
	}
	for _, p := range paths {
		if p = filepath.Clean(p); !filepath.IsAbs(p) || seen[p] {
			continue
		}
		seen[p] = true
		l.Roots = append(l.Roots, Root{Path: p, Alert: alert})
	}
}

// maxGitDirs bounds the git directories (the workspace's and its submodules') protected.
const maxGitDirs = 64

type resolver struct {
	ws      string
	lay     *Layout
	prot    map[string]bool
	guarded map[string]bool
	roots   map[string]bool
	gitdir  int
	fs      beneathFS
	// user is the configuration of the host's git outside the repository, with its includes
	// (userConfig).
	user []ConfigEntry
	// gitdirRel is the workspace's own git directory, workspace-relative ("" without one
	// beneath the workspace).
	gitdirRel string
	// hookDirs are the core.hooksPath folders of the workspace's repository beneath it, and
	// hookTexts the commands lefthook's configuration runs (hookScripts).
	hookDirs  []string
	hookTexts []string
	// trees are the work trees beneath the workspace of the linked worktrees and submodules
	// whose git directories were pinned (fromConfig reads each one's hooksPath).
	trees []workTreeDirs
}

// beneathFS looks paths up beneath the workspace without following symlinks (Linux: openat2).
type beneathFS interface {
	// kind returns the kind of ws/rel without following any symlink (KindAbsent when a
	// component is missing), or an error (a symlink on the way: ELOOP).
	kind(rel string) (string, error)
	// follow resolves ws/rel following symlinks, but only beneath ws; it returns the path.
	follow(rel string) (string, error)
	// read returns the regular file ws/rel, following symlinks only beneath ws; one longer
	// than max is not read (*tooLargeError).
	read(rel string, max int64) ([]byte, error)
	// readlink returns the target of the symlink ws/rel (no symlink followed on the way).
	readlink(rel string) (string, error)
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
	r.lay.Notes = append(r.lay.Notes, fmt.Sprintf(format, a...))
}

// protect pins ws/rel: an existing file or folder is bound read-only; an absent one is
// guarded. A symlink cannot be a mount point: the link itself is guarded (plan.Guard.Link:
// what the box puts in its place is moved out, and the link made again), and its target is
// protected when it stays beneath the workspace. So is a symlinked folder on the way to rel,
// and rel through it.
func (r *resolver) protect(rel string, wantDir bool) { r.protectDepth(rel, wantDir, 0) }

// maxLinkHops bounds how many symlinks on the way to a protected path are followed.
const maxLinkHops = 8

func (r *resolver) protectDepth(rel string, wantDir bool, hops int) {
	abs := filepath.Join(r.ws, rel)
	r.root(abs, true, false)
	k, err := r.fs.kind(rel)
	switch {
	case err != nil:
		if !r.linkOnWay(rel, wantDir, hops) {
			r.note("%s lies behind a symlink or cannot be read (%v): watched, not pinned", abs, err)
		}
	case k == KindFile || k == KindDir:
		r.pin(abs)
	case k == KindSymlink:
		r.guardLink(rel)
		target, err := r.fs.follow(rel)
		if err != nil || !within(target, r.ws) || target == r.ws {
			r.note("%s is a symlink leading outside the workspace (or nowhere): the link is guarded, its target is not the box's", abs)
			return
		}
		r.note("%s is a symlink: the link is guarded, its target %s is protected", abs, target)
		if hops >= maxLinkHops {
			return
		}
		trel, _ := filepath.Rel(r.ws, target)
		r.protectDepth(trel, wantDir, hops+1)
	case k == KindAbsent:
		// Guarded, not pinned: a component on the way that is a symlink is guarded itself (and
		// the path through it protected); one that is a file holds nothing beneath it.
		for dir := filepath.Dir(rel); dir != "."; dir = filepath.Dir(dir) {
			if pk, err := r.fs.kind(dir); err != nil || pk == KindFile {
				if err != nil && !r.linkOnWay(rel, wantDir, hops) {
					r.note("%s lies behind a symlink (%v): watched, not guarded", abs, err)
				}
				return
			}
		}
		r.guard(plan.Guard{Path: abs, Dir: wantDir, Beneath: r.ws})
	default:
		r.note("%s is neither a file nor a folder: watched, not pinned", abs)
	}
}

func (r *resolver) guard(g plan.Guard) {
	if !r.guarded[g.Path] {
		r.guarded[g.Path] = true
		r.lay.Guards = append(r.lay.Guards, g)
	}
}

// guardLink guards the symlink ws/rel itself: it stays, and what the box puts in its place is
// moved into the launch's proposed changes (plan.Guard.Link).
func (r *resolver) guardLink(rel string) {
	abs := filepath.Join(r.ws, rel)
	target, err := r.fs.readlink(rel)
	if err != nil {
		r.note("%s: read the symlink: %v: watched, not guarded", abs, err)
		return
	}
	r.guard(plan.Guard{Path: abs, Beneath: r.ws, Link: target})
}

// linkOnWay handles a protected path rel behind a symlinked folder: the first symlink on the
// way is guarded (guardLink), and rel through it is protected when that stays beneath the
// workspace. It reports whether it found a symlink on the way.
func (r *resolver) linkOnWay(rel string, wantDir bool, hops int) bool {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		on := filepath.Join(parts[:i]...)
		k, err := r.fs.kind(on)
		if err != nil || k != KindSymlink {
			if err != nil || k != KindDir {
				return false
			}
			continue
		}
		r.root(filepath.Join(r.ws, on), true, false)
		r.guardLink(on)
		target, err := r.fs.follow(on)
		abs := filepath.Join(r.ws, rel)
		if err != nil || !within(target, r.ws) || target == r.ws || hops >= maxLinkHops {
			r.note("%s lies behind the symlink %s, which leads outside the workspace (or nowhere): the link is guarded", abs, filepath.Join(r.ws, on))
			return true
		}
		trel, _ := filepath.Rel(r.ws, filepath.Join(target, filepath.Join(parts[i:]...)))
		r.note("%s lies behind the symlink %s: the link is guarded, %s is protected", abs, filepath.Join(r.ws, on), filepath.Join(r.ws, trel))
		r.protectDepth(trel, wantDir, hops+1)
		return true
	}
	return false
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
	// The host's own linked worktrees outside the workspace, the submodules', then the other
	// folders in worktrees/: what a box made there cannot push the host's past the bound.
	r.worktrees(rel, true)
	r.modules(filepath.Join(rel, "modules"), 0, first)
	r.worktrees(rel, false)
}

// worktrees protects the gitdirs of linked worktrees (gitdir/worktrees/<name>): with host
// true those of the host's own worktrees outside the workspace (hostWorktree), else the
// others: what points to the common dir, the pointer back to the worktree and the worktree's
// own configuration; and, for a worktree whose folder lies outside the workspace, the whole git
// directory. gitDir takes the host's first and the others after the submodules: folders a box
// made in worktrees/ cannot push them past the bound of git directories (an adversarial
// review of the twenty-seventh session: 70 empty folders in .git/worktrees left the host's
// ../wt unpinned at the next launch, whose box then redirected its commondir to a repository
// of its own, and the host's git status in ../wt ran that repository's core.fsmonitor). A
// worktree inside the workspace is not counted among the host's: a box can make any number.
func (r *resolver) worktrees(rel string, host bool) {
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
		top := ""
		if b, err := r.fs.read(filepath.Join(wt, "gitdir"), maxGitFile); err == nil {
			top = worktreeTop(filepath.Join(r.ws, wt), b)
		}
		outside := top == "" || !within(top, r.ws) || top == r.ws
		if (outside && r.namesBack(top, wt)) != host {
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
		if trel, in := r.beneath(top); in && top != "" {
			r.trees = append(r.trees, workTreeDirs{trel, []string{filepath.Join(r.ws, rel), filepath.Join(r.ws, wt)}})
		}
		if outside {
			// The box cannot see the worktree's folder: its git directory (HEAD, index, logs)
			// is bound read-only whole. The box's `git worktree prune` takes such a worktree
			// for stale and deletes its git directory, and the pins of commondir and gitdir
			// stopped that only where the file system lists them before HEAD and index (ext4
			// does, by hash; tmpfs lists the newest first, and the host's worktree lost its
			// HEAD and index: TestLinkedWorktreeSurvivesBox). So is one whose folder is unknown.
			r.pin(filepath.Join(r.ws, wt))
		}
	}
}

// namesBack reports whether the .git file of the work tree top (outside the workspace) names
// the git directory wt (workspace-relative) back, as git worktree add writes both: then the
// worktree is the host's (a box cannot write outside the workspace). The file is read as git
// reads it (ReadGitdir: no symlink followed at its end, no wait on a FIFO, no file over 1 MiB).
func (r *resolver) namesBack(top, wt string) bool {
	if top == "" {
		return false
	}
	gd, ok := ReadGitdir(filepath.Join(top, ".git"))
	return ok && gd == filepath.Join(r.ws, wt)
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
			r.submoduleGitDir(sub)
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
			r.submoduleGitDir(sub)
			continue
		}
		r.modules(sub, depth+1, nil) // a submodule named "a/b"
	}
}

// submoduleGitDir pins the git directory of a submodule (relative to the workspace) as gitDir
// does, and notes its work tree (its core.worktree, where git checked it out) when that lies
// beneath the workspace, for fromConfig.
func (r *resolver) submoduleGitDir(rel string) {
	r.gitDir(rel, nil)
	abs := filepath.Join(r.ws, rel)
	if top := workTree(r.ws, abs, ""); top != "" {
		if trel, in := r.beneath(top); in {
			r.trees = append(r.trees, workTreeDirs{trel, []string{abs}})
		}
	}
}

// maxIncludes bounds how deep include.path is followed (git's own bound is 10).
const maxIncludes = 10

// fromConfig pins what the configuration git reads for a work tree at top (relative to the
// workspace) makes git run from it: gitdirs are the git directories whose config and
// config.worktree git reads for that work tree, in order (a linked worktree's: its common
// dir's, then its own: configDirs). The files include.path and includeIf.*.path name beneath
// the workspace are pinned (whatever the condition, and while absent too: a box must not
// create one), and every folder core.hooksPath names, in that configuration or the user's
// (r.user; a relative hooksPath is each work tree's own folder: the workspace's top, a linked
// worktree or a submodule beneath it, review 32 F1/F2); with husky's .husky/_, .husky too: its
// hooks run .husky/<hook>. A repository's configuration beneath the workspace is pinned
// itself, so what it says is the user's; one outside it (the common dir of a workspace that is
// a linked worktree) the box cannot reach.
func (r *resolver) fromConfig(top string, gitdirs ...string) {
	entries := slices.Clone(r.user)
	w := configWalk{
		read: r.readGitFile,
		include: func(p string) {
			if rel, in := r.beneath(p); in {
				r.protect(rel, false)
			}
		},
		file: r.configNotes("the include targets and hooks folders it names"),
		deep: r.deepNote,
	}
	for _, gd := range gitdirs {
		for _, f := range GitDirConfigFiles {
			entries = append(entries, w.walk(filepath.Join(gd, f), 0)...)
		}
	}
	for _, e := range entries {
		if e.Section != "core" || e.HasSub || e.Key != "hookspath" {
			continue
		}
		p, ok := r.configPath(e.Value, filepath.Join(r.ws, top))
		if !ok {
			continue
		}
		rel, _ := filepath.Rel(r.ws, p)
		r.protect(rel, true)
		r.hookDirs = append(r.hookDirs, rel)
		if filepath.Base(rel) == "_" && filepath.Base(filepath.Dir(rel)) == ".husky" {
			r.protect(filepath.Dir(rel), true)
			r.hookDirs = append(r.hookDirs, filepath.Dir(rel))
		}
	}
}

// configNotes returns configWalk's file hook for the resolver: a note for a file too large to
// read (what names, which then are not pinned) and for a line git refuses.
func (r *resolver) configNotes(what string) func(p string, readErr, parseErr error) {
	return func(p string, readErr, parseErr error) {
		if tooLarge(readErr) != nil {
			r.note("%s is %v: %s are not pinned", p, readErr, what)
		}
		if parseErr != nil {
			r.note("%s: %v: what it names after that line is not pinned", p, parseErr)
		}
	}
}

// deepNote is configWalk's deep hook for the resolver.
func (r *resolver) deepNote(p string) {
	r.note("%s: includes nested deeper than %d are not followed", p, maxIncludes)
}

// readGitFile reads a file git reads for the repository: beneath the workspace through the
// bounded, no-follow reader (its symlinks followed only beneath it), elsewhere (the host's
// own files, which no box can write) as git does.
func (r *resolver) readGitFile(p string) ([]byte, error) {
	if rel, in := r.beneath(p); in {
		return r.fs.read(rel, maxCheckedFile)
	}
	return readFollow(p, maxCheckedFile)
}

// configDirs returns the git directories whose configuration git reads for the git directory
// gd (absolute): its common dir (what its commondir file, read with read, names) and gd itself,
// or gd alone.
func configDirs(gd string, read func(string) ([]byte, error)) []string {
	b, err := read(filepath.Join(gd, "commondir"))
	if err != nil {
		return []string{gd}
	}
	c := cString(strings.TrimRight(string(b), "\r\n"))
	if c == "" {
		return []string{gd}
	}
	if !filepath.IsAbs(c) {
		c = filepath.Join(gd, c)
	}
	return []string{filepath.Clean(c), gd}
}

// workTrees are the work trees beneath the workspace, other than its top, of the git
// directories the resolver pinned: linked worktrees (worktrees) and checked-out submodules
// (modules), each with the git directories whose configuration git reads there (configDirs).
// resolveWith pins what that configuration makes git run from each (fromConfig).
type workTreeDirs struct {
	top     string   // relative to the workspace
	gitdirs []string // absolute
}

// userConfig reads the configuration of the host's git outside the repository
// (userGitConfigs) with every file it includes (include.path, includeIf.*.path, whatever the
// condition, "~" expanded, a relative one beside the including file, followed maxIncludes
// deep) into r.user, and protects what of it lies beneath the workspace, as the repository's
// own include targets are (fromConfig): each included file (git reads it as the user's own
// configuration, for every repository its condition matches: review 14, F17, an
// includeIf "gitdir:~/work/" whose target ~/work/.gitconfig lay in a workspace ~/work, where a
// box gave it a core.fsmonitor), the init.templateDir folder (hooks git init and clone copy
// and run), core.excludesFile and core.attributesFile (what git ignores, which drivers it
// runs), an absolute core.hooksPath, and the program a program key names by its path
// (GitProgramKeys: core.fsmonitor = ~/work/tools/fsmon), for the repositories beneath the
// workspace with no git directory at its top too.
func (r *resolver) userConfig() {
	w := configWalk{
		read: func(p string) ([]byte, error) {
			if rel, in := r.beneathLinked(p); in {
				r.protect(rel, false)
				return r.fs.read(rel, maxCheckedFile)
			}
			return os.ReadFile(p)
		},
		file: r.configNotes("the files it includes"),
		deep: r.deepNote,
	}
	for _, p := range userGitConfigs() {
		r.user = append(r.user, w.walk(p, 0)...)
	}
	for _, e := range r.user {
		if e.Value == "" {
			continue
		}
		v, dir := e.Value, false
		switch name := e.Section + "." + e.Key; {
		case !e.HasSub && (name == "init.templatedir" || name == "core.hookspath"):
			dir = true
		case !e.HasSub && (name == "core.excludesfile" || name == "core.attributesfile"):
		case slices.ContainsFunc(GitProgramKeys, func(k GitProgramKey) bool { return k.match(e) && k.runs(e.Value) }):
			v = programPath(v)
		default:
			continue
		}
		v, ok := expandHome(v)
		if !ok || !filepath.IsAbs(v) {
			continue // a relative one is each repository's (fromConfig for core.hooksPath)
		}
		if rel, in := r.beneathLinked(filepath.Clean(v)); in {
			r.protect(rel, dir)
		}
	}
}

// programPath returns the program a program key's value names: its first word, without a
// leading "!" (an alias), when that is a path ("/…", "~…"); else "" (a program git looks up
// on PATH, or a shell command whose program the resolver cannot tell).
func programPath(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "!")
	if w := strings.Fields(v); len(w) > 0 && (strings.HasPrefix(w[0], "/") || strings.HasPrefix(w[0], "~")) {
		return w[0]
	}
	return ""
}

// beneathLinked is beneath for a path of the user's git configuration outside the workspace:
// one that does not lie beneath it as written is compared again with its symlinks resolved
// (plan.ResolveExisting), since git reaches the file through them: ~/.gitinc -> dotfiles/inc,
// or "~/work/.gitconfig" with $HOME a link (review 17, F2, F6). A path beneath it as written
// is not resolved: links beneath the workspace are the box's to make.
func (r *resolver) beneathLinked(p string) (string, bool) {
	if rel, in := r.beneath(p); in {
		return rel, in
	}
	return r.beneath(plan.ResolveExisting(p))
}

// beneath returns p relative to the workspace, and whether p lies strictly beneath it.
func (r *resolver) beneath(p string) (string, bool) {
	if !within(p, r.ws) || p == r.ws {
		return "", false
	}
	rel, err := filepath.Rel(r.ws, p)
	return rel, err == nil
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

// configPath resolves a path value of git configuration (relative to base, "~" the home
// folder) and reports whether it lies strictly beneath the workspace.
func (r *resolver) configPath(v, base string) (string, bool) {
	v, ok := expandHome(v)
	if v == "" || !ok {
		return "", false
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(base, v)
	}
	v = filepath.Clean(v)
	return v, within(v, r.ws) && v != r.ws
}

// submodules returns the names of the submodules .gitmodules lists, and protects the .git
// file (the gitdir pointer) of each path .gitmodules or the index of gitdir (relative) names as
// a gitlink: pinned where present, guarded where absent (an uninitialised submodule, after git
// submodule deinit or a clone without --recurse-submodules): git status at the top enters a
// gitlink whose .git appears, and takes configuration from the gitdir it names, such as one a
// box made in the box cache (review 13, F9). A .git folder there is a nested repository,
// which the workspace scan reads.
func (r *resolver) submodules(gitdir string) []string {
	var names, paths []string
	b, err := r.fs.read(".gitmodules", maxCheckedFile)
	if tooLarge(err) != nil {
		r.note("%s is %v: its submodules' gitdirs are pinned in name order, not first", filepath.Join(r.ws, ".gitmodules"), err)
	}
	if err == nil {
		es, err := ParseConfig(b)
		if err != nil {
			r.note("%s: %v: the submodules it lists after that line are pinned in name order, not first", filepath.Join(r.ws, ".gitmodules"), err)
		}
		for _, e := range es {
			if e.Section != "submodule" || !e.HasSub || e.Key != "path" {
				continue
			}
			names = append(names, e.Sub)
			if p, ok := r.configPath(e.Value, r.ws); ok {
				paths = append(paths, p)
			}
		}
	}
	if b, err := r.fs.read(filepath.Join(gitdir, "index"), maxIndexBytes); tooLarge(err) != nil {
		r.note("%s is %v: the .git of its gitlinks is not guarded", filepath.Join(r.ws, gitdir, "index"), err)
	} else if err == nil {
		// The object format is the repository's: its common dir's config (a linked worktree's
		// gitdir has none of its own), as git reads it.
		links, err := indexGitlinks(b, repoIDLen(r.ws, filepath.Join(r.ws, gitdir)))
		if err != nil {
			r.note("%s: %v: the .git of its gitlinks is not guarded", filepath.Join(r.ws, gitdir, "index"), err)
		}
		for _, l := range links {
			if p, ok := r.configPath(filepath.FromSlash(l), r.ws); ok {
				paths = append(paths, p)
			}
		}
	}
	for _, p := range paths {
		rel, _ := filepath.Rel(r.ws, filepath.Join(p, ".git"))
		if k, err := r.fs.kind(rel); err != nil || k != KindDir {
			r.protect(rel, false)
		}
	}
	return names
}

// resolveWith is Resolve over fs; boxRepo: see resolveExcept.
func resolveWith(ws string, extra []string, fs beneathFS, boxRepo bool) *Layout {
	r := &resolver{ws: ws, lay: &Layout{Workspace: ws}, prot: map[string]bool{}, guarded: map[string]bool{}, roots: map[string]bool{}, fs: fs}
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
	r.userConfig()
	for _, rel := range rels {
		if rel != ".git" {
			r.protect(rel, dirs[rel])
			continue
		}
		k, err := fs.kind(".git")
		dotGit := filepath.Join(ws, ".git")
		switch {
		case boxRepo:
			// A box of a launch still running, started when the workspace was in no
			// repository, may have made this one (git init) and may write its configuration
			// still: it is the box's, under the nested repositories' rule, as for that launch.
			// Taken for the user's, its config was pinned as trusted and this launch's checks
			// ran the host's git with it (review 22, TestAttackSecondLaunchTrustsBoxRepo).
			r.lay.NoRepository = true
		case err == nil && k == KindDir:
			r.root(dotGit, true, true)
			r.gitdirRel = ".git"
			r.gitDir(".git", r.submodules(".git"))
			r.fromConfig(".", dotGit)
		case err == nil && k == KindFile:
			r.protect(".git", false)
			gd, ok := ReadGitdir(dotGit)
			switch {
			case !ok:
				r.note("%s is a file without a gitdir line: pinned and watched", dotGit)
			case !within(gd, ws) || gd == ws:
				r.note("%s points to %s, outside the workspace: never bound (git in the box cannot reach it)", dotGit, gd)
				// What its configuration makes git run from this work tree is still the
				// workspace's: a relative core.hooksPath (review 32: a workspace that is a
				// linked worktree of a repository elsewhere, whose .githooks a box rewrote).
				r.fromConfig(".", configDirs(gd, r.readGitFile)...)
			default:
				rel, _ := filepath.Rel(ws, gd)
				if k, err := fs.kind(rel); err != nil || k != KindDir {
					r.note("%s points to %s, which is not a directory beneath the workspace: not bound", dotGit, gd)
					break
				}
				r.root(gd, true, true)
				r.gitdirRel = rel
				r.gitDir(rel, r.submodules(rel))
				r.fromConfig(".", configDirs(gd, r.readGitFile)...)
			}
		case err == nil && k == KindAbsent && surelyNoRepository(ws):
			// No repository at launch: the box may make one (git init, git clone URL .).
			// Guarded as a folder, what git wrote was moved out as it appeared, and git init
			// left a broken repository (issue #20). It is under the nested repositories' rule
			// instead: the workspace scan reads the .git it finds at the top as it reads any
			// other (config, hooks, commondir, alternates, modules/**, worktrees/*) and moves
			// aside what is executable, and the checks at exit read it without its
			// configuration (State.NoRepository). Beneath a repository's top (git in the
			// workspace finds the one above) .git stays guarded as a folder: a repository made
			// there would take the workspace out of the one above, and out of its checks.
			r.lay.NoRepository = true
		default:
			r.protect(".git", true)
		}
	}
	for _, t := range r.trees {
		r.fromConfig(t.top, t.gitdirs...)
	}
	r.lefthook()
	r.hookScripts()
	return r.lay
}
