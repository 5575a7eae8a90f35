package integrity

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The files the checks at exit have git read, and that a box can make something git waits on.
// git opens each as it finds it, without looking at its type: a FIFO there holds the open,
// and git with it, until its time bound (review 18, F3: a box's x/.gitignore FIFO held each
// git ls-files of the check at exit for 2 minutes, and the checks were skipped). Found by
// strace of the checks' git commands (ls-files --others [--ignored] --exclude-standard
// [--directory], ls-files --stage, config) with git 2.39, and checked one by one with a FIFO
// in place (docs/integrity.md, "What git opens").

// worktreeGitFiles are the names git opens in each folder of a work tree it walks: the
// per-folder ignore rules (dir.c), and the attributes the host's own git status and diff read
// (attr.c), which the host's git would wait on as well.
var worktreeGitFiles = []string{".gitignore", ".gitattributes"}

// gitDirFiles are the files of a git directory (the work tree's and the common one) the
// checks' git opens, or the host's next git status does: HEAD, commondir, config and
// config.worktree (setup and configuration), info/exclude (the ignore rules), packed-refs and
// shallow (refs and history), and info/attributes. The index is read as a copy (indexCopy);
// a split index's shared index (sharedindex.*) is found by listing the folder.
var gitDirFiles = []string{"HEAD", "commondir", "config", "config.worktree", "gitdir", "packed-refs", "shallow",
	filepath.Join("info", "exclude"), filepath.Join("info", "attributes")}

// gitBlockWalkBound bounds the entries blockingGitFiles lists in the work tree.
const gitBlockWalkBound = IgnoredWalkBound

// blockingGitFiles returns the files the checks' git would open in the workspace that are
// neither regular files nor folders nor, in the work tree, symlinks (git opens the work
// tree's .gitignore with O_NOFOLLOW, but follows a symlink in the git directory, so there a
// symlink to anything but a regular file counts): a FIFO, a socket, a device. It lists every
// folder of the work tree (names and types only: the same reads git's own walk makes), not
// entering .git, the snapshot's dependency folders or the box's own (the box writes those
// only in its overlay); and it reads the few fixed files of the workspace's git directories.
// incomplete says the walk stopped at its bound.
func (s *State) blockingGitFiles() (found []string, incomplete bool) {
	budget := gitBlockWalkBound
	var walk func(dir string)
	walk = func(dir string) {
		f, err := os.Open(dir)
		if err != nil {
			return // git cannot list it either
		}
		ents, _ := f.ReadDir(-1) // unsorted: no sort for a walk that only looks
		f.Close()
		for _, e := range ents {
			if budget--; budget < 0 {
				incomplete = true
				return
			}
			name := e.Name()
			if name == ".git" {
				continue
			}
			p := filepath.Join(dir, name)
			t := e.Type()
			if t.IsDir() {
				if s.owns(p) || s.inDeps(p) {
					continue
				}
				walk(p)
				continue
			}
			if slices.Contains(worktreeGitFiles, name) && !t.IsRegular() && t&fs.ModeSymlink == 0 {
				found = append(found, p)
			}
		}
	}
	walk(s.Workspace)
	gd := worktreeGitDir(s.Workspace)
	if gd == "" {
		return found, incomplete
	}
	dirs := []string{gd}
	if c := commonGitDir(s.Workspace); c != "" && c != gd {
		dirs = append(dirs, c)
	}
	for _, d := range dirs {
		names := slices.Clone(gitDirFiles)
		if ents, err := os.ReadDir(d); err == nil {
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "sharedindex.") {
					names = append(names, e.Name())
				}
			}
		}
		for _, n := range names {
			p := filepath.Join(d, n)
			fi, err := os.Lstat(p)
			if err != nil || fi.Mode().IsRegular() || fi.IsDir() {
				continue
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				// git follows it: what it leads to counts (a regular file, or nothing, is
				// harmless; os.Stat does not open it).
				if t, err := os.Stat(p); err != nil || t.Mode().IsRegular() || t.IsDir() {
					continue
				}
			}
			found = append(found, p)
		}
	}
	return found, incomplete
}

// inDeps reports whether p lies in one of the snapshot's dependency folders.
func (s *State) inDeps(p string) bool {
	for d := range s.Deps {
		if within(p, d) {
			return true
		}
	}
	return false
}

// unblockGit makes the files the checks' git opens in the workspace unable to hold it
// (blockingGitFiles): with move, each that the launch made (its ctime in the launch) is removed
// (moved aside, then removed unless a regular file or a folder is at that name by then: that is
// recorded in Aside), since the host's own git would wait on it too.
// It returns what it moved (one line each, for the user), what is left (made before the
// launch, or not movable: git is not run on that workspace, and the checks fall back to a
// walk in Go), and a note when the walk stopped at its bound. Its result is kept: the checks at exit call it once (gitLeft).
func (s *State) unblockGit(move bool) (moved, left []string, note string) {
	if s.gitChecked {
		return nil, s.gitLeft, ""
	}
	found, incomplete := s.blockingGitFiles()
	since := s.Started.Add(-ctimeLag).UnixNano()
	for _, p := range found {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		kind := fileKind(fi.Mode())
		_, _, c := identity(fi)
		if move && c >= since {
			aside, err := moveAside(s.Workspace, p)
			if err == nil {
				// What was moved is removed: a FIFO, a socket or a device holds no content,
				// a symlink only its target (named here). Left under its quarantine name it
				// stayed in the workspace, where the host's tools (an editor, a cat *, a
				// script's open) would still wait on it (review 18's fix; session 19). A
				// regular file or a folder at that name now (another writer's, between the
				// search and the move) is kept aside, recorded.
				if gone, what := removeSpecial(s.Workspace, aside); gone {
					moved = append(moved, fmt.Sprintf("%s: a %s the launch made where git reads a file (git, the host's too, would wait on it); removed%s", p, kind, what))
					continue
				}
				s.recordAside(aside)
				moved = append(moved, fmt.Sprintf("%s: a %s the launch made where git reads a file (git, the host's too, would wait on it); moved aside to %s", p, kind, aside))
				continue
			}
			left = append(left, fmt.Sprintf("%s, a %s the launch made, could not be moved aside: %v", p, kind, err))
			continue
		}
		if c >= since {
			left = append(left, fmt.Sprintf("%s is a %s (git would wait on it)", p, kind))
			continue
		}
		left = append(left, fmt.Sprintf("%s is a %s, made before the launch (git would wait on it)", p, kind))
	}
	if incomplete {
		// Past the bound git runs anyway: a file past it that holds git has it killed at its
		// time bound, and the checks fall back to the walk in Go.
		note = fmt.Sprintf("the files git reads were looked for in the first %d entries of the workspace only", gitBlockWalkBound)
	}
	if move {
		s.gitChecked, s.gitLeft = true, left
	}
	return moved, left, note
}

// fileKind names the type of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSymlink != 0:
		return "symlink to neither a regular file nor a folder"
	case m.IsDir():
		return "folder"
	}
	return "file that is not regular"
}

// gitCheckTimeout bounds the git calls of one repository in the checks at exit
// (ignoredEntries, UntrackedUnlisted); a test makes it short.
var gitCheckTimeout = 2 * time.Minute

// fallbackEntries is ignoredEntries without git, for a work tree where git failed or was not
// run (killed at its time bound, a file it would wait on left in place, its HEAD gone): the
// entries of the work tree at top that its index does not track (files, and folders holding
// no tracked file, ending in no "/"), read from a copy of the index (indexCopy) and a walk in
// Go, and its submodules checked out. The ignore rules are not read: every untracked entry is
// returned, those git status shows as well, so the caller takes more than git would have had
// it take, never less. An index that cannot be read is an error: tracked files cannot be told
// from the rest then.
func fallbackEntries(ws, top string) (entries, subs []string, err error) {
	gd := worktreeGitDir(top)
	if gd == "" {
		return nil, nil, errNoRepository
	}
	dir, err := os.MkdirTemp("", "agentbox-index-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	index, err := indexCopy(gd, dir)
	if err != nil {
		return nil, nil, err
	}
	tracked, dirs := map[string]bool{}, map[string]bool{}
	b, err := os.ReadFile(index)
	switch {
	case err == nil:
		es, err := indexEntries(b, repoIDLen(ws, gd))
		if err != nil {
			return nil, nil, fmt.Errorf("its index (%s) was not read: %w", filepath.Join(gd, "index"), err)
		}
		for _, e := range es {
			if e.name == "" { // a split index's entry replacing one of the shared index
				continue
			}
			tracked[e.name] = true
			for d := path.Dir(e.name); d != "." && !dirs[d]; d = path.Dir(d) {
				dirs[d] = true
			}
			if e.gitlink() {
				if _, err := os.Lstat(filepath.Join(top, filepath.FromSlash(e.name), ".git")); err == nil {
					subs = append(subs, filepath.FromSlash(e.name))
				}
			}
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, nil, err
	}
	budget := IgnoredWalkBound
	var walk func(rel string) error
	walk = func(rel string) error {
		f, err := os.Open(filepath.Join(top, filepath.FromSlash(rel)))
		if err != nil {
			return nil // gone, or unreadable: git could not list it either
		}
		ents, _ := f.ReadDir(-1)
		f.Close()
		for _, e := range ents {
			if budget--; budget < 0 {
				return fmt.Errorf("past the bound of %d entries looked at", IgnoredWalkBound)
			}
			r := path.Join(rel, e.Name())
			switch {
			case e.Name() == ".git" || tracked[r]:
			case e.IsDir() && dirs[r]:
				if err := walk(r); err != nil {
					return err
				}
			default:
				entries = append(entries, filepath.FromSlash(r))
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, nil, err
	}
	return entries, subs, nil
}
