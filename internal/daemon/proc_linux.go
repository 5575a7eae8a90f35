package daemon

import (
	"errors"
	"fmt"
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

// killProcess sends SIGKILL to pid.
func killProcess(pid int) error { return unix.Kill(pid, unix.SIGKILL) }

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
