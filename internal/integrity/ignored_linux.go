package integrity

import (
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// changedFiles appends to out the workspace-relative paths of the regular files and symlinks
// at or beneath rel, in the ignored places of the work tree repo (not following symlinks, not
// entering .git, the dependency folders or other work trees: lookInto), that the launch left:
// whose ctime is at or after since, or that lie beneath a folder whose ctime is (made, renamed
// or changed in the launch: all it holds is new to that place). Beneath what the launch's
// checks moved aside (Aside), the ctime the move gave it takes the place of since, and only
// what changed after it counts. It takes one from *budget per entry, and fails with
// errDepBudget when that is spent.
func (s *State) changedFiles(rel, repo string, since int64, budget *int, out *[]string) error {
	root := filepath.Join(s.Workspace, rel)
	var asides []string
	for a := range s.Aside {
		if within(a, root) || within(root, a) {
			asides = append(asides, a)
		}
	}
	// wholes are the folders on the way to the current entry whose ctime is in the launch,
	// outermost first.
	var wholes []string
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile, or unreadable
		}
		if *budget <= 0 {
			return errDepBudget
		}
		*budget--
		r, rerr := filepath.Rel(s.Workspace, p)
		if rerr != nil {
			return nil
		}
		if p != root && !s.lookInto(r, repo) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		for len(wholes) > 0 && !within(p, wholes[len(wholes)-1]) {
			wholes = wholes[:len(wholes)-1]
		}
		if !d.IsDir() && !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil
		}
		// The innermost aside holding p, if any: only what changed after the move is new.
		aside, moved := "", int64(0)
		for _, a := range asides {
			if within(p, a) && len(a) > len(aside) {
				aside, moved = a, s.Aside[a]
			}
		}
		c := st.Ctim.Nano()
		isNew := c >= since
		if aside != "" {
			isNew = c > moved && c >= since
		}
		inWhole := len(wholes) > 0 && (aside == "" || within(wholes[len(wholes)-1], aside))
		if d.IsDir() {
			if isNew && !inWhole && !s.sameFolder(p, st.Ino) {
				wholes = append(wholes, p)
			}
			return nil
		}
		if isNew || inWhole {
			*out = append(*out, r)
		}
		return nil
	})
}

// sameFolder reports whether the folder at p, of inode ino, is the one RecordFolders found at
// p when the launch began. By path, not by inode alone: a recorded folder renamed elsewhere is
// taken whole, since where a folder lies gives what it holds its meaning (an earlier launch's
// quarantined node_modules/, itself an ignored place, renamed to dist/ kept its x.test.js
// under a record by inode: TestAttackIgnoredRenamedQuarantine); the host's own files in it are
// moved into the store, never removed (changes.TakeIgnored; review 17, F3).
func (s *State) sameFolder(p string, ino uint64) bool {
	if s.folders == nil {
		return false
	}
	i, ok := s.folders.inode[p]
	return ok && i == ino
}

// oldFolders records in inode the folders at or beneath rel (walked as changedFiles walks)
// whose ctime is before since, by path; it does not go into one whose ctime is not (a folder
// not recorded is taken whole at exit whatever lies in it). It takes one from *budget per
// entry, and fails with errDepBudget when that is spent.
func (s *State) oldFolders(rel, repo string, since int64, budget *int, inode map[string]uint64) error {
	root := filepath.Join(s.Workspace, rel)
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if *budget <= 0 {
			return errDepBudget
		}
		*budget--
		r, rerr := filepath.Rel(s.Workspace, p)
		if rerr != nil || p != root && !s.lookInto(r, repo) {
			return filepath.SkipDir
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Ctim.Nano() >= since {
			return filepath.SkipDir
		}
		inode[p] = st.Ino
		return nil
	})
}
