package daemon

import (
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/integrity"
)

// repoTop returns the top level of the git repository that holds dir (absolute and
// symlink-resolved): the nearest directory at or above dir with a .git directory (holding
// HEAD) or a .git file (a linked worktree's "gitdir: …"), or "" when there is none. It reads
// the directory entries only: git itself is never run on a workspace a box may have written
// (a planted core.fsmonitor would run on the host). A .git file is read as the integrity watch
// reads it (integrity.ReadGitdir: no symlink followed, no FIFO waited on, none over 1 MiB):
// a box can leave a sparse .git of gigabytes in any folder, and the next launch started there
// would make the daemon read it whole (review 12, F3).
func repoTop(dir string) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		g := filepath.Join(d, ".git")
		if st, err := os.Lstat(g); err == nil {
			if st.IsDir() {
				if _, err := os.Lstat(filepath.Join(g, "HEAD")); err == nil {
					return d
				}
			} else if _, ok := integrity.ReadGitdir(g); ok {
				return d
			}
		}
		if d == "/" {
			return ""
		}
	}
}
