package daemon

import (
	"bytes"
	"os"
	"path/filepath"
)

// repoTop returns the top level of the git repository that holds dir (absolute and
// symlink-resolved): the nearest directory at or above dir with a .git directory (holding
// HEAD) or a .git file (a linked worktree's "gitdir: …"), or "" when there is none. It reads
// the directory entries only: git itself is never run on a workspace a box may have written
// (a planted core.fsmonitor would run on the host).
func repoTop(dir string) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		g := filepath.Join(d, ".git")
		if st, err := os.Lstat(g); err == nil {
			switch {
			case st.IsDir():
				if _, err := os.Lstat(filepath.Join(g, "HEAD")); err == nil {
					return d
				}
			case st.Mode().IsRegular():
				if b, err := os.ReadFile(g); err == nil && bytes.HasPrefix(b, []byte("gitdir:")) {
					return d
				}
			}
		}
		if d == "/" {
			return ""
		}
	}
}
