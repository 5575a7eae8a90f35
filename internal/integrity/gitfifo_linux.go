package integrity

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// fifoPoll is how often runCheckGit looks at a running git's threads and descriptors.
const fifoPoll = 10 * time.Millisecond

// runCheckGit runs c (a git of the checks: checkGit) and returns its standard output, as
// c.Output does (stderr is left to the caller). While it runs, its threads and descriptors
// are looked at every fifoPoll: a thread waiting in the open of a FIFO (the kernel's
// wait_for_partner: no writer yet), or a FIFO among git's open files (a writer holds it: the
// read waits on the writer), has git killed at once, and the error is errGitFIFO, naming the
// file where its path can be read. The search before git runs (unblockGit) removes what the
// launch made; a FIFO made after it (a second box on the workspace) or outside the workspace
// (the user's core.excludesFile) held git for its time bound, 2 minutes (session 19).
func runCheckGit(c *exec.Cmd) ([]byte, error) {
	var stdout bytes.Buffer
	if c.Stdout == nil {
		c.Stdout = &stdout
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	stop, found := make(chan struct{}), make(chan string, 1)
	go func() {
		t := time.NewTicker(fifoPoll)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if p, ok := waitsOnFIFO(c.Process.Pid); ok {
				found <- p
				c.Process.Kill()
				return
			}
		}
	}()
	err := c.Wait()
	close(stop)
	select {
	case p := <-found:
		if err == nil {
			break // it ended by itself: what was looked at was no longer git
		}
		if p == "" {
			p = "a file it reads"
		}
		return nil, fmt.Errorf("%w (%s): git was stopped", errGitFIFO, p)
	default:
	}
	return stdout.Bytes(), err
}

// waitsOnFIFO reports whether the process pid (a git of the checks) waits on a FIFO: one of
// its threads in a FIFO's open, or a FIFO among its open files other than its standard
// input, output and error (git's own pipes are none: no named file). It names the FIFO when
// it can (the open's path, read from the process's memory; the open file's path).
func waitsOnFIFO(pid int) (string, bool) {
	proc := "/proc/" + strconv.Itoa(pid)
	tasks, err := os.ReadDir(proc + "/task")
	if err != nil {
		return "", false // gone
	}
	for _, t := range tasks {
		task := proc + "/task/" + t.Name()
		if w, err := os.ReadFile(task + "/wchan"); err == nil && string(w) == "wait_for_partner" {
			return openPath(pid, task), true
		}
	}
	fds, err := os.ReadDir(proc + "/fd")
	if err != nil {
		return "", false
	}
	for _, fd := range fds {
		if n, err := strconv.Atoi(fd.Name()); err != nil || n <= 2 {
			continue
		}
		l := proc + "/fd/" + fd.Name()
		target, err := os.Readlink(l)
		if err != nil || !strings.HasPrefix(target, "/") {
			continue // pipe:[…], socket:[…], anon_inode:…: no named file
		}
		if fi, err := os.Stat(l); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
			return target, true
		}
	}
	return "", false
}

// openSyscalls are the numbers of open and openat on the machines agentbox builds for, and
// the argument holding the path (1-based, as /proc/PID/syscall lists them after the number).
var openSyscalls = map[string]map[int64]int{
	"amd64": {2: 1, 257: 2, 437: 2}, // open, openat, openat2
	"arm64": {56: 2, 437: 2},        // openat, openat2
}

// openPath reads the path the open task waits in, from its syscall line and the process's
// memory; "" when it cannot (another architecture, no access).
func openPath(pid int, task string) string {
	b, err := os.ReadFile(task + "/syscall")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return ""
	}
	nr, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return ""
	}
	arg, ok := openSyscalls[runtime.GOARCH][nr]
	if !ok {
		return ""
	}
	ptr, err := strconv.ParseUint(strings.TrimPrefix(f[arg], "0x"), 16, 64)
	if err != nil {
		return ""
	}
	mem, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return ""
	}
	defer mem.Close()
	buf := make([]byte, 4096)
	n, _ := mem.ReadAt(buf, int64(ptr))
	p, _, ok := bytes.Cut(buf[:n], []byte{0})
	if !ok || len(p) == 0 {
		return ""
	}
	path := string(p)
	if !filepath.IsAbs(path) {
		base := "/proc/" + strconv.Itoa(pid) + "/cwd"
		if arg == 2 {
			if dirfd, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64); err == nil && int32(dirfd) != -100 { // AT_FDCWD
				base = "/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(int(int32(dirfd)))
			}
		}
		if d, err := os.Readlink(base); err == nil {
			path = filepath.Join(d, path)
		}
	}
	return path
}
