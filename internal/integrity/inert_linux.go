package integrity

import (
	"path"
	"path/filepath"
	"strings"
)

// eventRules say which of the watch's events can change nothing the targeted rescan of their
// folder finds (inert), so that they call for none: a box writing 5,000 ordinary files in 50
// folders had the watch rescan each folder after every 50 ms batch of its writes, 55 % of the
// daemon's CPU beside the work and most of the 440 ms it used (docs/benchmarks.md, "Work in
// the box"). An event is inert only when every rule below holds, each one stricter than what
// scanDir looks at; anything else rescans its folder as before, and the periodic check and
// the check at exit read every folder whole, whatever the events were.
//
//   - it is a file's event (not a folder's) in a folder of the workspace the watch owns
//     itself (not a .git and not a folder outside the workspace), with a name;
//   - the name is not hidden (no leading "."), not one of git's or the scan's own names
//     (inertNever), and not Python's code (.py, .pyc, .so, .pth and the like: bytecode and
//     extension modules that shadow a source);
//   - neither the file nor its folder is a protected root;
//   - the folder is no repository's top (repositoryTop: its rescan reads the repository's
//     git directory and index, and a plain file's event there is what has the watch read a
//     forged cache tree in time, TestAttackCacheTreeSwappedUnderSameSig), read again after
//     any folder's event there or above (forget) and any event of a .git or of a name that
//     makes a bare repository (inertNever);
//   - no folder on the folder's way from the workspace's top is hidden or named like a git
//     directory's part (hooks, objects, refs, …), the folder is no skill or command folder,
//     no folder the top's .envrc puts on PATH nor beneath one, and no folder of nested
//     configuration or on the way to one (vendor for vendor/modules.txt, a profile's
//     workspace folder);
//   - the nested configuration's names for that folder do not match the name (go.work,
//     *.code-workspace, gradle.properties, …), nor is the name a configuration folder's.
//
// Pinned folders count as not pinned here (the stricter reading). The rules are read once,
// when the watch starts (a launch's configuration and roots do not change while it runs), and
// used by the one goroutine that reads the events.
type eventRules struct {
	ws       string
	files    []NestedConfigFile
	roots    map[string]bool            // the protected roots' paths
	rootIn   map[string]map[string]bool // a folder → the names of the roots in it
	dirNames map[string]bool            // every name in the nested configuration's folders (.mvn, wrapper, vendor, …)
	pathDirs map[string]bool
	folders  map[string]*inertFolder // a folder's rules, made at its first event; nil: never inert
}

// inertFolder is a folder whose files' events may be inert: its workspace-relative path and
// the matcher of the nested configuration's names there.
type inertFolder struct {
	rel     string
	matcher *nestedMatcher
}

// inertNever are names whose events always call for a rescan: what makes a folder a git
// directory or a repository, and the names the scan reads for themselves.
var inertNever = func() map[string]bool {
	m := map[string]bool{
		"HEAD": true, "ORIG_HEAD": true, "FETCH_HEAD": true, "MERGE_HEAD": true, "index": true,
		"commondir": true, "gitdir": true, "packed-refs": true, "objects": true, "refs": true,
		"package.json": true, "__pycache__": true, "node_modules": true,
	}
	for _, f := range GitDirConfigFiles { // config, config.worktree
		m[f] = true
	}
	return m
}()

// gitFolderNames are the names of a git directory's folders: a folder of that name (or beneath
// one) may be a bare repository's or a gitdir's, whose events the scan reads as such.
var gitFolderNames = map[string]bool{
	"hooks": true, "info": true, "objects": true, "refs": true, "worktrees": true, "modules": true,
	"rr-cache": true, "logs": true, "branches": true,
}

// pythonCode are the suffixes of what Python runs in place of a source, or beside it.
var pythonCode = []string{".py", ".pyc", ".pyo", ".pyd", ".so", ".pth"}

func (s *State) eventRules() *eventRules {
	r := &eventRules{ws: s.Workspace, files: nestedFiles(s.Config), roots: s.rootSet(), rootIn: map[string]map[string]bool{},
		dirNames: map[string]bool{}, pathDirs: map[string]bool{}, folders: map[string]*inertFolder{}}
	for p := range r.roots {
		d, name := filepath.Split(p)
		d = filepath.Clean(d)
		if r.rootIn[d] == nil {
			r.rootIn[d] = map[string]bool{}
		}
		r.rootIn[d][name] = true
	}
	// A name where nestedConfigFolder may find a configuration folder for a file of an
	// ordinary folder: the last name of a non-anchored Dir, or of a folder on its way (a Dir
	// with no Name lying above is the folder rule's to refuse).
	for _, f := range r.files {
		if f.Dir == "" || strings.HasPrefix(f.Dir, "/") {
			continue
		}
		for _, c := range strings.Split(f.Dir, "/") {
			r.dirNames[c] = true
		}
	}
	for d := range s.PathDirs {
		r.pathDirs[d] = true
	}
	return r
}

// inert reports whether an event for the file name in the folder dir, which the watch owns
// itself, can change nothing the targeted rescan of dir finds.
func (r *eventRules) inert(dir, name string) bool {
	if name == ".git" || inertNever[name] {
		// What may make dir a repository's top, or a bare repository: its rules are read
		// again at its next event.
		r.forget(dir)
		return false
	}
	if name == "" || strings.HasPrefix(name, ".") || r.roots[dir] || r.rootIn[dir][name] {
		return false
	}
	for _, suf := range pythonCode {
		if strings.HasSuffix(name, suf) {
			return false
		}
	}
	f, ok := r.folders[dir]
	if !ok {
		f = r.folder(dir)
		r.folders[dir] = f
	}
	if f == nil {
		return false
	}
	if f.matcher.match(name) != "" {
		return false
	}
	never := func(string) bool { return false }
	return !r.dirNames[name] || nestedConfigFolder(r.files, path.Join(f.rel, name), never) == ""
}

// forget drops the rules read for dir and for every folder beneath it: a folder's event there
// (made, removed or moved: a .git, objects/ or refs/ made, another repository moved to its
// path) may have changed what they say (repositoryTop), and they are read again at the next
// file event. The watch calls it at every folder event and when a watched folder goes.
// Past forgetScanMax folders read, it drops them all instead of looking for those beneath dir:
// an `rm -rf node_modules` in the box raises an event for each of thousands of folders, and a
// walk of the whole map at each would cost the square of their number; what is dropped is only
// read again.
func (r *eventRules) forget(dir string) {
	delete(r.folders, dir)
	if len(r.folders) > forgetScanMax {
		clear(r.folders)
		return
	}
	for d := range r.folders {
		if strings.HasPrefix(d, dir+"/") {
			delete(r.folders, d)
		}
	}
}

// forgetScanMax bounds forget's walk of the folders read.
const forgetScanMax = 256

// folder returns the rules of dir's files' events, or nil when none of them is ever inert.
func (r *eventRules) folder(dir string) *inertFolder {
	if !within(dir, r.ws) {
		return nil
	}
	rel, err := filepath.Rel(r.ws, dir)
	if err != nil {
		return nil
	}
	rel = filepath.ToSlash(rel)
	if rel != "." {
		for _, c := range strings.Split(rel, "/") {
			if strings.HasPrefix(c, ".") || gitFolderNames[c] {
				return nil
			}
		}
	}
	for d := range r.pathDirs {
		if d == "." || rel == d || strings.HasPrefix(rel, d+"/") {
			return nil
		}
	}
	never := func(string) bool { return false }
	if inSkillFolder(rel) || nestedConfigFolder(r.files, rel, never) != "" || repositoryTop(dir) {
		return nil
	}
	return &inertFolder{rel: rel, matcher: newNestedMatcher(r.files, rel, never)}
}
