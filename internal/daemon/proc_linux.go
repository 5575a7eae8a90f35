package daemon

import (
	"os"
	"path/filepath"
	"strings"
)

// hostSockets returns the paths of the pathname unix sockets bound in the daemon's network
// namespace (the host's), as /proc/net/unix lists them, with their folders' symlinks
// resolved; abstract sockets, which a box in its own network namespace cannot reach, are left
// out. A socket bound by a relative path is listed as the kernel shows it.
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
		out = append(out, p)
	}
	return out, nil
}
