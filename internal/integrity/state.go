package integrity

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/atomicfile"
)

// State is what the watch last saw of one launch: every root, and the executable
// configuration found in the workspace. It starts as the snapshot taken before the box spawns;
// each transition moves it on, so a reversal is another transition and nothing is reported
// twice. It is saved in the launch directory so that a restarted daemon continues from it.
type State struct {
	Workspace string      `json:"workspace"`
	Limits    Limits      `json:"limits"`
	Roots     []RootState `json:"roots"`
	// Exec is the executable configuration found outside the roots, by path.
	Exec map[string]string `json:"exec"`
	// Notes are what Resolve could not pin (reported at launch).
	Notes []string `json:"notes,omitempty"`
	// PackedReplace are the replace refs each packed-refs file held at the snapshot (by
	// path): the ones a box adds are stripped, these are kept.
	PackedReplace map[string][]string `json:"packedReplace,omitempty"`
	// Config are the launch's programs' workspace configuration files (Layout.Config), looked
	// for in every folder besides NestedConfigFiles; nil looks for NestedConfigFiles only (a
	// state saved before it was kept).
	Config []NestedConfigFile `json:"config,omitempty"`
	// Started is when the snapshot was taken: an index entry that makes git take a file
	// changed since for unchanged is checked against the file's content (zero: every file).
	Started time.Time `json:"started,omitzero"`
	// Hidden are the entries of the workspace's indexes (its own, and those its gitlinks lead
	// to) flagged skip-worktree or assume-unchanged (workspace-relative path → flag) as last
	// seen; Stale the entries reported for stat data that hides a change (path → the file's
	// ctime and the entry's id when reported: reported once each); IndexErrs why an index could not be read (by path), once reported.
	Hidden    map[string]string `json:"hidden,omitempty"`
	Stale     map[string]string `json:"stale,omitempty"`
	IndexErrs map[string]string `json:"indexErrs,omitempty"`
	// Branches are the branch tips (refs/heads/* → id) of the workspace's repositories at the
	// snapshot, by common git directory: the check at exit reports a rewritten history
	// (verifyBranches).
	Branches map[string]map[string]string `json:"branches,omitempty"`
	// Symrefs are which of those branches and tags were symbolic refs at the snapshot (ref →
	// the ref it names), by common git directory: one that became a symbolic ref, or another
	// one, is reported at exit.
	Symrefs map[string]map[string]string `json:"symrefs,omitempty"`
	// Stash are the stash entries (the reflog of refs/stash: id → message) of the
	// workspace's repositories at the snapshot, by common git directory: one that is gone at
	// exit is reported (verifyBranches).
	Stash map[string]map[string]string `json:"stash,omitempty"`
	// Reftable are the common git directories of the workspace's repositories in the
	// reftable format, whose refs are not recorded: the check at exit says so (an alert).
	Reftable []string `json:"reftable,omitempty"`
	// RefsUnread says, by common git directory, why some of a repository's branches and tags
	// were not recorded at the snapshot (a packed-refs too large or unreadable, more than
	// maxBranches of a kind): the check at exit says so (an alert), since what was not recorded
	// cannot be checked.
	RefsUnread map[string]string `json:"refsUnread,omitempty"`
	// Deps are the workspace's dependency folders at the snapshot (DepFolderKinds, the
	// outermost ones), by path: the check at exit moves aside one that is not among them, or
	// is another folder now. nil (a state saved before it was kept) moves none.
	Deps map[string]DepFolder `json:"deps"`
	// Todos are the sequencer todo lists (sequencerTodos) that existed at the snapshot, with
	// or without exec lines: a stopped rebase of the host's. A todo list with exec lines at any
	// other path is the launch's own rebase (the box's, most often): left in place while the
	// box runs (its git rebase --continue needs it), its path kept in Deferred, and moved aside
	// by the check at exit. nil (a state saved before it was kept) defers none.
	Todos    map[string]bool `json:"todos"`
	Deferred map[string]bool `json:"deferred,omitempty"`
	// Own are the dependency folders the box gets as its own (the daemon's overlays, set by
	// Watcher.OwnDeps): the box writes its layer, never the host's folder beneath, so the
	// host's changes there while the box runs are the host's. nil: none known, and every
	// dependency folder is taken for one the box could write.
	Own []string `json:"own,omitempty"`
	// Aside are what the launch's checks moved aside in the workspace (State.moveAside), by
	// path, each with its ctime (ns) read right after the move: the walk of the git-ignored
	// places at exit passes over what lies there unchanged since, and takes what changed after
	// (IgnoredChanged). A name is no mark: a box chooses its names (review 16, F1).
	Aside map[string]int64 `json:"aside,omitempty"`
	// Worktrees are the linked worktrees of the workspace's repository beneath the workspace
	// at the snapshot (workspace-relative): the walk of the git-ignored places at exit treats
	// each as a work tree of its own, not as ignored files of the workspace's (review 16, F9).
	Worktrees []string `json:"worktrees,omitempty"`
	// Changes is the launch's proposed-changes store (a folder of the daemon's, outside the
	// workspace): the check at exit keeps there the launch's version of a tracked file whose
	// change the host's git views do not show, and puts the file back (verifyHiddenEdits).
	// "": such a file is named only, and stays as the launch left it.
	Changes string `json:"changes,omitempty"`
	// NoRepository says the workspace was in no repository at the snapshot (Layout.NoRepository):
	// a repository at its top at exit is the box's (git init, git clone URL .), whose
	// configuration the checks at exit do not run git with: it is read through a private git
	// directory, as a submodule's is (topGit). false: the workspace's repository, if any, is
	// the one of the launch, its configuration pinned.
	NoRepository bool `json:"noRepository,omitempty"`
	// EnvrcWhitelisted is Layout.EnvrcWhitelisted: a new or changed .envrc is moved aside.
	EnvrcWhitelisted bool `json:"envrcWhitelisted,omitempty"`
	// PathDirs are the folders the top's allowed .envrc puts on PATH (Layout.PathDirs),
	// workspace-relative, each with its inode at the snapshot (0: none was there): the check
	// at exit takes what the launch left in them (pathDirsChanged).
	PathDirs map[string]uint64 `json:"pathDirs,omitempty"`
	// ProtectedIndex records, at the snapshot, the entries of the workspace's indexes (its own,
	// its submodules', nested repositories', linked worktrees') at protected paths and on the
	// way to them: index path → entry name → entrySig. The check at exit compares
	// (stagedProtected): an entry the launch changed or added that is not the host's file, and
	// one it removed, is the box's version staged for the user's next commit.
	ProtectedIndex map[string]map[string]string `json:"protectedIndex,omitempty"`

	// lockedIndexes are the indexes the check at exit wrote beside git's lock (editIndex), to
	// be checked again once the lock has gone (RecheckIndexes); exitTops are the repositories
	// that check's scan found. Not saved: a daemon restarted meanwhile does not check again.
	lockedIndexes map[string]bool
	exitTops      []string
	// stripLeft are the indexes whose extensions the check at exit could not remove (git's
	// lock could not be taken), reported once, each with its stripSig then: checked again once
	// that changes (RecheckIndexes). Not saved.
	stripLeft map[string]string
	// treeSeen are the indexes whose cache tree verifyCacheTrees found honest, with their
	// ctime and size then. Not saved.
	treeSeen map[string]string
	// folders is the record of the folders in ignored places there at the launch's start
	// (RecordFolders); nil: none is known.
	folders *folderRecord
	// gitChecked says the checks at exit have made the files their git opens unable to hold
	// it (unblockGit); gitLeft are those it could not (git is not run then). Not saved.
	gitChecked bool
	gitLeft    []string
	// memo holds the ids of the files the check at exit hashed, for its passes to share
	// (blobMemo); set for the check at exit's length only. Not saved.
	memo *blobMemo
	// stagedTold holds the staged protected entries reported at exit (stagedProtected), so
	// that a recheck of the indexes does not report them again.
	stagedTold map[string]string
}

// Snapshot records the roots of lay and scans the workspace for executable configuration.
func Snapshot(lay *Layout, lim Limits) *State {
	s := &State{Workspace: lay.Workspace, Limits: lim, Notes: lay.Notes, Config: lay.Config, Started: time.Now(), NoRepository: lay.NoRepository, EnvrcWhitelisted: lay.EnvrcWhitelisted}
	s.Roots = Take(lay.Roots, lim)
	// An incomplete scan here shows in the check at exit, which rescans (VerifyExec).
	s.Deps = map[string]DepFolder{}
	var repos gitRepos
	s.Exec, _ = scanWorkspace(lay.Workspace, s.passOver(), s.Config, lim, s.Deps, &repos)
	maps.DeleteFunc(s.Exec, func(_, d string) bool { return d == packageUnsettled })
	s.Hidden, s.IndexErrs, s.ProtectedIndex = readHidden(lay.Workspace, repos.tops, s.protectedRel())
	s.Branches, s.Symrefs, s.Stash, s.Reftable, s.RefsUnread = recordBranches(repos.tops)
	s.Worktrees = worktreesBeneath(lay.Workspace, repos.tops)
	for _, p := range slices.Sorted(maps.Keys(s.IndexErrs)) {
		s.Notes = append(slices.Clip(s.Notes), "the index's skip-worktree and assume-unchanged flags, and stat data that hides a changed file, are not checked: "+s.IndexErrs[p])
	}
	identify(s.Deps, nil)
	s.Todos = sequencerLists(lay.Workspace, repos)
	s.PathDirs = pathDirInodes(lay.Workspace, lay.PathDirs)
	for p := range s.Exec {
		if isPackedRefs(p) {
			if refs, err := packedReplaceAt(lay.Workspace, p); err == nil {
				if s.PackedReplace == nil {
					s.PackedReplace = map[string][]string{}
				}
				s.PackedReplace[p] = refs
			}
		}
	}
	return s
}

func (s *State) rootSet() map[string]bool {
	m := make(map[string]bool, len(s.Roots))
	for _, r := range s.Roots {
		m[r.Path] = true
	}
	return m
}

// passOver is what the workspace scans pass over: the protected roots (which the watch
// covers itself), by path, and what the launch's checks moved aside (State.Aside) while it is
// as the check left it. Before (review 16, F1, left in the scans by fix16a), they passed over
// any name holding QuarantineSuffix, which a box chooses: a box's nested configuration, hook
// or dependency folder so named stayed where the host's tools read it.
type passOver struct {
	roots map[string]bool
	aside map[string]int64 // State.Aside: path → the ctime the move gave it
}

// passOver returns what the scans of s pass over.
func (s *State) passOver() passOver { return passOver{roots: s.rootSet(), aside: s.Aside} }

// moved reports whether p is, or lies beneath, what the launch's checks moved aside, and has
// not changed since: its ctime is not after the one the move gave the innermost such path
// (what a moved folder held keeps its older ctimes; what was written or renamed there after
// the move is newer, and is scanned as anything else).
func (o passOver) moved(p string) bool {
	aside, at := "", int64(0)
	for a, c := range o.aside {
		if within(p, a) && len(a) > len(aside) {
			aside, at = a, c
		}
	}
	if aside == "" {
		return false
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return false
	}
	_, _, c := identity(fi)
	return c != 0 && c <= at
}

// VerifyRoots compares every root with what was seen last and returns the transitions.
func (s *State) VerifyRoots() []Transition {
	var out []Transition
	roots := make([]Root, len(s.Roots))
	for i, r := range s.Roots {
		roots[i] = r.Root
	}
	cur := take(roots, s.Roots, s.Limits)
	for i := range cur {
		if t, ok := compare(s.Roots[i], cur[i]); ok {
			out = append(out, t)
			s.Roots[i] = cur[i]
		}
	}
	return out
}

// VerifyExec rescans the whole workspace for executable configuration (bounded) and returns
// what appeared, changed or went. A scan that reached its bound is a transition of its own
// (on the workspace, every time): what lies in the folders it did not check is unknown.
func (s *State) VerifyExec() []Transition { return s.verifyExec(false) }

// VerifyExit is VerifyExec for the check at exit, which also moves aside every dependency
// folder (DepFolderKinds, anywhere in the workspace the scan visits) that appeared or was
// replaced since the snapshot and holds anything: one the box made (a project it created, an
// npm install where there was no node_modules, a virtualenv of a name the launch did not
// know), or made at the path of one the host removed while the box ran, which detached the
// box's overlay there. The host's tools would run what it holds (docs/toolchains.md).
// While the box runs they are left alone: its own npm install and npm test need them.
func (s *State) VerifyExit() []Transition { return s.verifyExec(true) }

func (s *State) verifyExec(exit bool) []Transition {
	if exit {
		s.memo = &blobMemo{}
		defer func() { s.memo = nil }()
	}
	var deps map[string]DepFolder
	if exit && s.Deps != nil {
		deps = map[string]DepFolder{}
	}
	var repos gitRepos
	found, notChecked := scanWorkspace(s.Workspace, s.passOver(), s.Config, s.Limits, deps, &repos)
	var out []Transition
	if deps != nil {
		var moved []string
		out, moved = s.moveNewDeps(deps)
		for p := range found {
			if slices.ContainsFunc(moved, func(m string) bool { return within(p, m) }) {
				delete(found, p) // it went with its folder
			}
		}
	}
	if exit {
		for p, d := range found {
			if d == packageUnsettled && changedAtExit(p, s.since()) {
				found[p] = packageUnreadAtExit
			}
		}
	}
	out = append(out, s.mergeExec(found, exit, func(path string) bool { return true })...)
	if exit {
		s.exitTops = repos.tops
	}
	tr, gitdirs := s.verifyIndexes(repos.tops, exit)
	out = append(out, tr...)
	if exit {
		out = append(out, s.verifyHiddenEdits(repos.tops)...)
		out = append(out, s.verifyBranches()...)
		out = append(out, s.verifyWorktreeRecords(repos.tops)...)
	}
	out = append(out, s.verifyObjects(append(gitdirs, repos.gitdirs...), s.since())...)
	if notChecked > 0 {
		out = append(out, Transition{Kind: Modified, Path: s.Workspace, Alert: true, Detail: fmt.Sprintf(
			"scan incomplete: %d folders not checked (unreadable, or past the bound of %d folders the scan visits); executable configuration in them was not looked for",
			notChecked, s.Limits.withDefaults().ScanDirs)})
	}
	return out
}

// IndexesLocked reports whether the check at exit wrote an index beside git's lock that has
// not been checked again since the lock went, or left extensions it could not remove
// (RecheckIndexes).
func (s *State) IndexesLocked() bool { return len(s.lockedIndexes)+len(s.stripLeft) > 0 }

// RecheckIndexes checks the indexes again (as the check at exit does) once no index the check
// at exit wrote beside git's lock still has its lock, and returns the transitions: a host git
// that held the lock (git commit waiting in its editor) renamed over the index the one it
// read, with the box's flags and stat data. It returns nothing while a lock is there. An
// index whose extensions could not be removed (its folder unwritable) is checked again once it
// or its folder has changed (stripSig: the user's chmod of .git), not before.
func (s *State) RecheckIndexes() []Transition {
	for p := range s.lockedIndexes {
		if _, err := os.Lstat(p + ".lock"); err == nil {
			return nil
		}
	}
	if len(s.lockedIndexes) == 0 {
		changed := false
		for p, sig := range s.stripLeft {
			changed = changed || stripSig(p) != sig
		}
		if !changed {
			return nil
		}
	}
	s.lockedIndexes = nil
	tr, _ := s.verifyIndexes(s.exitTops, true)
	return tr
}

// VerifyExecIn rescans the given directories (not their subdirectories, except those new to
// the scan, which the caller passes too) and returns the transitions of findings owned by them.
func (s *State) VerifyExecIn(dirs []string) []Transition {
	return s.verifyExecIn(dirs, nil)
}

// verifyExecIn is VerifyExecIn, calling took (when not nil) with each folder's scan time.
func (s *State) verifyExecIn(dirs []string, took func(dir string, d time.Duration)) []Transition {
	found := map[string]string{}
	set := map[string]bool{}
	skip := s.passOver()
	files := nestedFiles(s.Config)
	for _, d := range dirs {
		set[d] = true
		start := time.Now()
		scanDir(s.Workspace, d, skip, files, found, nil, nil) // a folder it cannot list: the full scans count it
		if took != nil {
			took(d, time.Since(start))
		}
	}
	out := s.mergeExec(found, false, func(path string) bool { return set[ownerDir(path)] })
	return append(out, s.verifyCacheTrees(dirs)...)
}

// ownerDir is the directory whose scan finds path: X for X/.envrc and for everything in X/.git
// (config files, hooks, alternates, submodule and worktree gitdirs), a bare repository X for
// X/config, X/hooks/*, X/rr-cache/* and X/objects/info/*, and its own folder for any other file (a hook of sub/.claude/hooks/, which the scan
// of sub/.claude/hooks finds: taking sub/.claude for its owner, as for a bare repository's
// hooks, left its removal to the next full scan and had an event in sub/.claude alone report it
// removed while it was there).
func ownerDir(path string) string {
	if i := strings.Index(path, "/.git/"); i >= 0 {
		return path[:i]
	}
	d := filepath.Dir(path)
	switch filepath.Base(d) {
	case ".git":
		return filepath.Dir(d)
	case "hooks", "rr-cache":
		if bareRepository(filepath.Dir(d)) {
			return filepath.Dir(d)
		}
	case "info":
		// A bare repository's objects/info/alternates.
		if repo := filepath.Dir(filepath.Dir(d)); filepath.Base(filepath.Dir(d)) == "objects" && bareRepository(repo) {
			return repo
		}
	}
	return d
}

// bareRepository reports whether dir is what scanDir takes for a bare repository: a folder
// git takes for a git directory (isGitDirectory), or one with HEAD, objects/ and a config.
func bareRepository(dir string) bool {
	_, head := os.Lstat(filepath.Join(dir, "HEAD"))
	objects, oerr := os.Lstat(filepath.Join(dir, "objects"))
	config, cerr := os.Lstat(filepath.Join(dir, "config"))
	return head == nil && (isGitDirectory(dir) || oerr == nil && objects.IsDir() && cerr == nil && !config.IsDir())
}

// mergeExec records the findings of a scan (found) against what was seen last, moving aside
// what is new or changed; exit is the check at exit, which also moves aside the todo lists of
// the launch's own rebases (deferred while the box ran).
func (s *State) mergeExec(found map[string]string, exit bool, owned func(string) bool) []Transition {
	if s.Exec == nil {
		s.Exec = map[string]string{}
	}
	var out []Transition
	for p, d := range found {
		old, had := s.Exec[p]
		if d == packageUnsettled {
			continue // not read: what was recorded stands
		}
		kind := Created
		switch {
		case exit && s.Deferred[p]:
			had = false // left in place while the box ran, never reported: new to the host
		case !had:
		case old != d:
			kind = Modified
		default:
			continue
		}
		if !exit && s.Todos != nil && ownRebase(p, d) && !s.Todos[p] {
			// A rebase the launch began (the box's own git rebase -i --exec, stopped at an
			// edit or a conflict): its git rebase --continue needs the list. Moved aside at exit.
			if s.Deferred == nil {
				s.Deferred = map[string]bool{}
			}
			s.Deferred[p] = true
			s.Exec[p] = d
			continue
		}
		delete(s.Deferred, p)
		if isPackedRefs(p) {
			// Replace refs a box packed: stripped under git's own lock, the others kept.
			n, lockAside, err := stripPackedReplace(s.Workspace, p, s.PackedReplace[p])
			if lockAside != "" {
				s.recordAside(lockAside)
				d += "; a packed-refs.lock held longer than git waits for one (a box's) was moved aside to " + lockAside
			}
			if err == nil {
				out = append(out, Transition{Kind: kind, Path: p, Detail: fmt.Sprintf("%s; the %d replace refs added since the launch began were removed", d, n), Alert: true})
				if had {
					s.Exec[p] = old
				} else {
					delete(s.Exec, p)
				}
				continue
			}
			if errors.Is(err, errOutside) || errors.Is(err, errPackedRecord) && s.changedSince(p) {
				// A symlink leading out of the workspace (where a box may write, as the box
				// cache): what git reads there cannot be filtered; the link is moved aside. So
				// is a file the launch wrote that cannot be read in records: git then reads
				// the loose refs alone (review 15, F14).
				if aside, merr := s.moveAside(p); merr == nil {
					what := "; moved aside to " + aside
					if !errors.Is(err, errOutside) {
						what = "; written while the box ran: moved aside whole to " + aside + " (git reads the loose refs alone; the refs packed in it are in that file)"
					}
					out = append(out, Transition{Kind: kind, Path: p, Detail: d + what, Alert: true})
					delete(s.Exec, p)
					continue
				}
			}
			// Recorded as found: the same finding at the next check is no new transition
			// (review 15, F14 saw one recorded 15 times in a second).
			out = append(out, Transition{Kind: kind, Path: p, Detail: d + "; the replace refs could not be removed: " + err.Error(), Alert: true})
			s.Exec[p] = d
			continue
		} else if s.movable(p) {
			// New or changed since the snapshot: what the host's git would run is the box's
			// (or was written while a box ran). It is moved aside, never deleted.
			aside, err := s.moveAside(p)
			if err == nil {
				out = append(out, Transition{Kind: kind, Path: p, Detail: d + "; moved aside to " + aside, Alert: true})
				delete(s.Exec, p)
				continue
			}
			d += "; could not be moved aside: " + err.Error()
		}
		out = append(out, Transition{Kind: kind, Path: p, Detail: d, Alert: true})
		s.Exec[p] = d
	}
	for p, d := range s.Exec {
		if _, ok := found[p]; !ok && owned(p) && s.Deferred[p] {
			// The launch's own rebase ended (or was aborted): nothing was reported of it.
			delete(s.Exec, p)
			delete(s.Deferred, p)
			continue
		}
		if _, ok := found[p]; !ok && owned(p) && !isPackageJSON(p) {
			if _, err := os.Lstat(p); err == nil && isConfig(p) {
				// Still there but no longer executable.
				out = append(out, Transition{Kind: Modified, Path: p, Detail: "no executable configuration left (was: " + d + ")", Alert: true})
			} else {
				out = append(out, Transition{Kind: Removed, Path: p, Detail: d, Alert: true})
			}
			delete(s.Exec, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// changedSince reports whether the file at p (not followed) changed during the launch: its
// ctime is not older than since.
func (s *State) changedSince(p string) bool {
	fi, err := os.Lstat(p)
	if err != nil {
		return false
	}
	_, _, ct := identity(fi)
	return ct >= s.since()
}

// identify fills in the identity of each of deps, after dropping those beneath another and
// those the launch's checks moved aside, unchanged since (moved, when not nil: passOver.moved;
// .agentbox-quarantined-1/node_modules/x/node_modules, which nothing runs from); one that
// cannot be read (gone since it was listed) is dropped. A name is no mark: a box's
// web.agentbox-quarantined-1/node_modules is a dependency folder like any other (review 16, F1).
func identify(deps map[string]DepFolder, moved func(string) bool) {
	outermost(deps)
	for p, d := range deps {
		id, err := depIdentity(p)
		if err != nil || moved != nil && moved(p) {
			delete(deps, p)
			continue
		}
		id.Runs = d.Runs
		id.Empty = d.Runs != pthRuns && emptyDir(p)
		deps[p] = id
	}
}

// moveNewDeps moves aside each of deps (found by the scan at exit) that is not the folder the
// snapshot saw at its path and is not empty (an empty one runs nothing: the launch's own
// placeholders, released after this check), or is that folder, empty then and filled since
// (past the launch's bound, the box writes it in place), and each *.pth file that is not the
// one the snapshot saw; it returns the transitions and the paths moved.
func (s *State) moveNewDeps(deps map[string]DepFolder) ([]Transition, []string) {
	identify(deps, s.passOver().moved)
	var out []Transition
	var moved []string
	budget := s.Limits.withDefaults().DepEntries
	// The folders first: a *.pth file in one moved goes with it.
	paths := slices.SortedFunc(maps.Keys(deps), func(a, b string) int {
		return cmp.Or(cmp.Compare(boolInt(deps[a].Runs == pthRuns), boolInt(deps[b].Runs == pthRuns)), strings.Compare(a, b))
	})
	for _, p := range paths {
		d := deps[p]
		pth := d.Runs == pthRuns
		if pth && slices.ContainsFunc(moved, func(m string) bool { return within(p, m) }) {
			continue
		}
		old, had := s.Deps[p]
		same := had && old.Dev == d.Dev && old.Ino == d.Ino && old.Btime == d.Btime
		filled := same && old.Empty && !d.Empty
		if !pth && emptyDir(p) {
			continue
		}
		changed := ""
		if pth && !same && s.owns(p) {
			continue // made by the host in the box's own folder, which the box never writes
		}
		if same && !filled {
			// The folder or file there at launch: moved aside when anything in it was written
			// since, by the box in place (past the launch's bounds) or by the host, which the
			// check cannot tell apart (docs/integrity.md, "Code the host loads from dependency
			// folders").
			var err error
			if changed, err = s.changedIn(p, &budget); err != nil {
				out = append(out, Transition{Kind: Modified, Path: p, Alert: true, Detail: fmt.Sprintf(
					"a dependency folder not checked for what was written in it while the box ran (%v; at most %d entries are looked at): the host's tools would run what it holds (%s)",
					err, s.Limits.withDefaults().DepEntries, d.Runs)})
			}
			if changed == "" {
				continue
			}
		}
		kind, what := Created, "a dependency folder made while the box ran"
		switch {
		case changed != "" && pth:
			kind, what = Modified, "a python path configuration file (.pth) in a site-packages folder, written while the box ran (by the box, or by the host: the check cannot tell)"
		case changed != "":
			kind, what = Modified, "a dependency folder in which "+relTo(p, changed)+" was written while the box ran (by the box in place, or by the host: the check cannot tell; install it again on the host from the reviewed lockfile)"
		case pth && had:
			kind, what = Replaced, "a python path configuration file (.pth) in a site-packages folder, written while the box ran in place of the one there at launch"
		case pth:
			what = "a python path configuration file (.pth) in a site-packages folder, made while the box ran"
		case filled:
			kind, what = Modified, "a dependency folder that was empty when the launch began and was filled while the box ran (it was not the box's own)"
		case had:
			kind, what = Replaced, "a dependency folder made while the box ran in place of the one there at launch (removed meanwhile)"
		}
		detail := what + ", which the host's tools would run from (" + d.Runs + ")"
		if pth {
			detail = what + ": " + d.Runs
		}
		if aside, err := s.moveAside(p); err == nil {
			detail += "; moved aside to " + aside
			moved = append(moved, p)
			delete(s.Deps, p)
		} else {
			detail += "; could not be moved aside: " + err.Error()
		}
		out = append(out, Transition{Kind: kind, Path: p, Detail: detail, Alert: true})
	}
	return out, moved
}

// changedIn returns the first entry of the dependency folder or .pth file p, there at launch,
// written since the snapshot (changedWithin), or "". The box's own folders (Own) are not
// looked into: the box wrote its layer, never them, and what the host wrote there is the
// host's. A state without a start time finds nothing.
//
// The bound is ctimeLag before the snapshot began, not a second as for the index (since): the
// host's writes before the launch are the host's, and must not cost it its folder.
func (s *State) changedIn(p string, budget *int) (string, error) {
	if s.Started.IsZero() || s.owns(p) {
		return "", nil
	}
	return changedWithin(p, s.Started.Add(-ctimeLag).UnixNano(), budget)
}

// ctimeLag is how far behind the clock the kernel may stamp a ctime: the coarse clock it reads
// moves once a tick, 10 ms at the lowest common rate (HZ=100; 4 ms at Debian's 250). The box's
// first write comes after the snapshot's scan and the launch's later stages (about 9 ms at
// their median, docs/benchmarks.md) in any case; the bound does not rest on that.
const ctimeLag = 10 * time.Millisecond

// owns reports whether p lies in one of the box's own dependency folders (Own).
func (s *State) owns(p string) bool {
	return slices.ContainsFunc(s.Own, func(o string) bool { return within(p, o) })
}

// relTo returns q relative to p ("." for p itself).
func relTo(p, q string) string {
	if r, err := filepath.Rel(p, q); err == nil {
		return r
	}
	return q
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// movable reports whether a finding at p is moved aside when new or changed: git's
// configuration and hooks are; an .envrc is not (direnv runs none it was not allowed to, and
// asks again when one changes: reported, an alert), unless direnv's configuration whitelists
// a prefix of the workspace (EnvrcWhitelisted): direnv runs any .envrc there without an allow.
func (s *State) movable(p string) bool {
	return filepath.Base(p) != ".envrc" || s.EnvrcWhitelisted
}

func isConfig(p string) bool {
	b := filepath.Base(p)
	return b == "config" || b == "config.worktree"
}

// Save writes the state to path atomically (0600).
func (s *State) Save(path string) error {
	w, err := s.Saver()
	if err != nil {
		return err
	}
	return w(path)
}

// Saver encodes the state as it is now and returns what writes that to a path, as Save does:
// the write may then run elsewhere (on another goroutine, while the state changes) and still
// save the state of this moment.
func (s *State) Saver() (func(path string) error, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return func(path string) error {
		if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
			return fmt.Errorf("integrity: save state: %w", err)
		}
		return nil
	}, nil
}

// Load reads a state saved by Save.
func Load(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("integrity: load state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("integrity: load state %s: %w", path, err)
	}
	return &s, nil
}
