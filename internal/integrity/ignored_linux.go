package integrity

import (
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// changedFiles appends to out the workspace-relative paths of the regular files and symlinks
// at or beneath rel (not following symlinks, not entering .git, the dependency folders or what
// was moved aside) whose ctime is at or after since; it takes one from *budget per entry, and
// fails with errDepBudget when that is spent.
func (s *State) changedFiles(rel string, since int64, budget *int, out *[]string) error {
	root := filepath.Join(s.Workspace, rel)
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
		if p != root && !s.lookInto(r) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil || st.Ctim.Nano() < since {
			return nil
		}
		*out = append(*out, r)
		return nil
	})
}
