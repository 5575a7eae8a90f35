package integrity

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// pathDirBatch is how many names pathDirsChanged reads from a folder at a time: it reads them
// all, in batches, so that a folder padded with names never hides one past a bound (review
// 21b: a bin/git listed past the 100 000th name was never looked at).
const pathDirBatch = 4096

// pathDirInodes returns the inode of each folder of dirs (workspace-relative) beneath ws, not
// followed (0 for one that is absent or no folder).
func pathDirInodes(ws string, dirs []string) map[string]uint64 {
	if len(dirs) == 0 {
		return nil
	}
	out := map[string]uint64{}
	for _, d := range dirs {
		out[d] = 0
		if fi, err := os.Lstat(filepath.Join(ws, d)); err == nil && fi.IsDir() {
			_, out[d], _ = identity(fi)
		}
	}
	return out
}

// pathCommand reports whether fi is an entry a shell's PATH search may run: a regular file
// with an execute bit, or a symlink (to anything: what it leads to may be one).
func pathCommand(fi os.FileInfo) bool {
	return fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 || fi.Mode()&os.ModeSymlink != 0
}

// pathDirsChanged returns the workspace-relative paths of the executable files and symlinks
// (pathCommand) directly in the folders the top's allowed .envrc puts on PATH
// (State.PathDirs: PATH_add bin) that the launch created or changed (ctime at or after
// since), and of every one in such a folder that is not the folder there at the snapshot
// (made or put there in the launch): the host's shell, once direnv has loaded the folder's
// environment at the next cd, runs them for the user's every command of that name (review
// 21: a box's bin/git). Only the folder's own entries that a PATH search may run count: a
// file without an execute bit is left as work (the box cannot set the bit once it has
// ended); .git and what the launch's checks moved aside, unchanged since, are passed over.
// A path that is no longer a folder (a symlink, a file) is taken itself when the launch
// made it. Every name of the folder is read, however many (pathDirBatch at a time).
func (s *State) pathDirsChanged(since int64) []string {
	var out []string
	for _, d := range slices.Sorted(maps.Keys(s.PathDirs)) {
		p := filepath.Join(s.Workspace, d)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		_, ino, ctime := identity(fi)
		if !fi.IsDir() {
			if d != "." && ctime >= since && (fi.Mode().IsRegular() || fi.Mode()&os.ModeSymlink != 0) {
				out = append(out, d)
			}
			continue
		}
		whole := ino != s.PathDirs[d]
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		for {
			names, err := f.Readdirnames(pathDirBatch)
			for _, n := range names {
				rel := filepath.Join(d, n)
				if rel == ".git" || filepath.Base(rel) == ".git" {
					continue
				}
				fi, err := os.Lstat(filepath.Join(p, n))
				if err != nil || !pathCommand(fi) {
					continue
				}
				_, _, c := identity(fi)
				if moved, ok := s.Aside[filepath.Join(p, n)]; ok && c <= moved {
					continue
				}
				if whole || c >= since {
					out = append(out, rel)
				}
			}
			if err != nil || len(names) == 0 {
				break
			}
		}
		f.Close()
	}
	return out
}
