package daemon

import (
	"os"
	"path/filepath"
	"strings"
)

// hostSockets returns the paths of the pathname unix sockets bound in the daemon's network
// namespace (the host's), as /proc/net/unix lists them, with their folders' symlinks
// resolved, where a socket file is found now; abstract sockets, which a box in its own network
// namespace cannot reach, are left out. A socket bound by a relative path is listed as the
// kernel shows it.
func hostSockets() ([]string, error) {
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		// Num RefCount Protocol Flags Type St Inode Path
		f := strings.Fields(line)
		if i == 0 || len(f) < 8 {
			continue
		}
		p := strings.Join(f[7:], " ")
		if !strings.HasPrefix(p, "/") || seen[p] {
			continue
		}
		seen[p] = true
		if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			p = filepath.Join(dir, filepath.Base(p))
		}
		// The path is the string the binding process gave bind(), in its own mount namespace,
		// through its own symlinks: only a socket file found there now counts. Before, another
		// local user bound a socket through a symlink of theirs, pointed the symlink at the
		// victim's workspace, and every launch there was refused, though no socket lay in it
		// (review 17, F7).
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSocket == 0 {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}
