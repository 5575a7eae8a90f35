package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// processStartTime returns the start time of pid in clock ticks since boot (field 22 of
// /proc/<pid>/stat), which together with the pid identifies one process.
func processStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: split after the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0, errors.New("short /proc stat")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// sameProcess reports whether pid is alive and still the process that started at start. A
// pidfd pins the pid while the start time is compared, so a recycled pid never matches.
func sameProcess(pid int, start uint64) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	got, err := processStartTime(pid)
	if err != nil || got != start {
		return false
	}
	return unix.PidfdSendSignal(fd, 0, nil, 0) == nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

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

// rootOnlyDirs are the system folders scanned for what only root may read when the daemon runs
// as root: /etc holds the host's keys (ssh host keys, TLS private keys, database and PAM
// secrets) and is small enough to walk at each launch; /usr, /opt and /lib are not walked
// (docs/security.md).
var rootOnlyDirs = []string{"/etc"}

// rootOnlyPaths lists the files and folders beneath dirs that an ordinary user cannot read
// (no read permission for others; for a folder, no read or search permission), so that a box
// running as root — whose uid is host root — reads no more than an ordinary user would. A
// folder listed is not descended into (its mask hides all of it); symbolic links are left to
// their targets.
func rootOnlyPaths(dirs []string) ([]string, error) {
	var out []string
	for _, root := range dirs {
		err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if de.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			fi, err := de.Info()
			if err != nil {
				return nil // gone since it was listed
			}
			perm := fi.Mode().Perm()
			switch {
			case de.IsDir() && perm&0o005 != 0o005:
				if p != root {
					out = append(out, p)
					return filepath.SkipDir
				}
			case !de.IsDir() && perm&0o004 == 0:
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list what only root may read in %s: %w", root, err)
		}
	}
	return out, nil
}
