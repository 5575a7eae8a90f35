package wrap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Canonicalize resolves a managed program to the executable the scanner matches: path (the
// policy's managed install) or, when path is "", the PATH lookup (pathEnv) that skips
// launchers. Symlinks are resolved; only an executable regular file that is not a launcher
// qualifies.
func Canonicalize(name, path, pathEnv string) (Target, error) {
	t := Target{Name: name}
	if path == "" {
		if path = LookPath(name, pathEnv); path == "" {
			return t, fmt.Errorf("%s: %w: not found on PATH (%s); name its executable in containment.programs[].path", name, ErrNotInstalled, pathEnv)
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return t, fmt.Errorf("%s: %w: %s does not exist", name, ErrNotInstalled, path)
		}
		return t, fmt.Errorf("%s: %w", name, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return t, fmt.Errorf("%s: %w", name, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return t, fmt.Errorf("%s: %s is not an executable regular file", name, real)
	}
	if IsLauncher(real) {
		return t, fmt.Errorf("%s: %s is an agentbox launcher, not the program", name, real)
	}
	t.Path, t.ID = real, idOf(st)
	if interp, arg, ok := shebang(real); ok {
		t.Script = true
		add := func(p string) {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				if st, err := os.Stat(r); err == nil {
					t.Interpreters = append(t.Interpreters, idOf(st))
				}
			}
		}
		add(interp)
		if filepath.Base(interp) == "env" && arg != "" {
			if p := LookPath(arg, pathEnv); p != "" {
				add(p)
			}
		}
	}
	return t, nil
}

func idOf(st os.FileInfo) FileID {
	s := st.Sys().(*syscall.Stat_t)
	return FileID{Dev: uint64(s.Dev), Ino: s.Ino}
}

// shebang returns the interpreter of a #! script and its first argument.
func shebang(file string) (interp, arg string, ok bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 256)).ReadString('\n')
	if !strings.HasPrefix(line, "#!") || (err != nil && err != io.EOF) {
		return "", "", false
	}
	w := strings.Fields(line[2:])
	if len(w) == 0 {
		return "", "", false
	}
	if len(w) > 1 {
		// "#!/usr/bin/env -S node --flag": the program is the first word not an option.
		for _, x := range w[1:] {
			if !strings.HasPrefix(x, "-") {
				arg = x
				break
			}
		}
	}
	return w[0], arg, true
}

// Scanner finds processes running a Target outside every box. Its zero value scans /proc for
// the calling user's processes.
type Scanner struct {
	// Proc is the proc file system. "" means /proc.
	Proc string
}

func (s Scanner) proc() string {
	if s.Proc == "" {
		return "/proc"
	}
	return s.Proc
}

// Scan returns the processes of the calling user, outside every box, that run one of targets.
// "Outside every box" is decided by namespace, never by name: every box has its own user
// namespace, so a process whose user namespace is the scanner's own is in none. A process
// matches a Target by the identity (device and inode) of its executable, never by name; a
// script Target matches a process whose executable is its interpreter and whose command line
// names the script file itself.
func (s Scanner) Scan(targets []Target) ([]Finding, error) {
	self, err := os.Readlink(filepath.Join(s.proc(), "self/ns/user"))
	if err != nil {
		return nil, fmt.Errorf("scan: own user namespace: %w", err)
	}
	ents, err := os.ReadDir(s.proc())
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	uid := os.Getuid()
	me := os.Getpid()
	now := time.Now()
	var out []Finding
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me {
			continue
		}
		t, p, ok := s.match(pid, self, uid, targets)
		if ok {
			out = append(out, Finding{Target: t, Process: p, Seen: now})
		}
	}
	return out, nil
}

// match checks one process. Every read may fail (the process exited, or is not ours): such a
// process does not match.
func (s Scanner) match(pid int, selfNS string, uid int, targets []Target) (Target, Process, bool) {
	dir := filepath.Join(s.proc(), strconv.Itoa(pid))
	fi, err := os.Stat(dir)
	if err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != uid {
		return Target{}, Process{}, false
	}
	if ns, err := os.Readlink(filepath.Join(dir, "ns/user")); err != nil || ns != selfNS {
		return Target{}, Process{}, false
	}
	st, err := os.Stat(filepath.Join(dir, "exe"))
	if err != nil || !st.Mode().IsRegular() {
		return Target{}, Process{}, false
	}
	id := idOf(st)
	var cmdline []string
	for _, t := range targets {
		hit := id == t.ID
		if !hit && t.Script && containsID(t.Interpreters, id) {
			if cmdline == nil {
				cmdline = readExecdCmdline(dir)
			}
			hit = namesScript(dir, cmdline, t.ID, uid)
		}
		if !hit {
			continue
		}
		p := Process{Pid: pid, UID: uid}
		p.Exe, _ = os.Readlink(filepath.Join(dir, "exe"))
		p.StartTime, p.PPid, _ = statFields(dir)
		if p.PPid > 0 {
			p.ParentExe, _ = os.Readlink(filepath.Join(s.proc(), strconv.Itoa(p.PPid), "exe"))
		}
		if cmdline == nil {
			cmdline = readCmdline(dir)
		}
		p.Cmdline = cmdline
		// Confirm the identity again: the pid may have exec'd something else meanwhile.
		if st2, err := os.Stat(filepath.Join(dir, "exe")); err != nil || idOf(st2) != id {
			return Target{}, Process{}, false
		}
		return t, p, true
	}
	return Target{}, Process{}, false
}

func containsID(ids []FileID, id FileID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// namesScript reports whether argv[1], argv[2] or argv[3] (after interpreter options) is the
// script file with identity id, resolved from the process's root and working directory (dir is
// /proc/PID) through trusted folders only (resolveTrusted): a path another user can change
// never makes a process a match.
func namesScript(dir string, argv []string, id FileID, uid int) bool {
	var cwd string
	for i := 1; i < len(argv) && i <= 3; i++ {
		a := argv[i]
		if a == "" {
			continue
		}
		if !filepath.IsAbs(a) {
			if cwd == "" {
				c, err := os.Readlink(filepath.Join(dir, "cwd"))
				if err != nil || !filepath.IsAbs(c) {
					return false // gone, or its working directory is outside its root
				}
				cwd = c
			}
			a = filepath.Join(cwd, a)
		}
		if got, ok := resolveTrusted(filepath.Join(dir, "root"), a, uid); ok && got == id {
			return true
		}
	}
	return false
}

// maxLinks bounds the symlinks resolveTrusted follows, as the kernel's own limit (40) does.
const maxLinks = 40

// resolveTrusted resolves the absolute path name beneath root (a process's /proc/PID/root)
// one element at a time, without the kernel following any symlink, and returns the identity of
// the regular file it names. It refuses (ok false) as soon as the path leads through something
// another user could have changed: every folder on the way must belong to uid or root and be
// writable by neither group nor others (a root-owned sticky folder such as /tmp is accepted,
// since there only an entry's owner can replace it), and every symlink followed and the file
// itself must belong to uid or root. A symlink the user or root made in such a folder is
// followed (npm installs its bin links so); one another user planted, or anything in a folder
// another user owns or can write, is not.
func resolveTrusted(root, name string, uid int) (FileID, bool) {
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return FileID{}, false
	}
	defer unix.Close(rootFD)
	trusted := func(st *unix.Stat_t) bool { return int(st.Uid) == uid || st.Uid == 0 }
	var rst unix.Stat_t
	if unix.Fstat(rootFD, &rst) != nil || !trusted(&rst) || !safeFolder(&rst) {
		return FileID{}, false
	}
	// stack holds the open folders from root down to the current one; stack[0] is root.
	stack := []int{rootFD}
	defer func() {
		for _, fd := range stack[1:] {
			unix.Close(fd)
		}
	}()
	todo := strings.Split(name, "/")
	links := 0
	for len(todo) > 0 {
		elem := todo[0]
		todo = todo[1:]
		switch elem {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
			continue
		}
		cur := stack[len(stack)-1]
		fd, err := unix.Openat(cur, elem, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return FileID{}, false
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || !trusted(&st) {
			unix.Close(fd)
			return FileID{}, false
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := readlinkFD(fd)
			unix.Close(fd)
			if links++; err != nil || links > maxLinks {
				return FileID{}, false
			}
			if strings.HasPrefix(target, "/") {
				for _, fd := range stack[1:] {
					unix.Close(fd)
				}
				stack = stack[:1]
			}
			todo = append(strings.Split(target, "/"), todo...)
		case unix.S_IFDIR:
			if !safeFolder(&st) {
				unix.Close(fd)
				return FileID{}, false
			}
			stack = append(stack, fd)
		case unix.S_IFREG:
			unix.Close(fd)
			if len(strings.Join(todo, "")) != 0 {
				return FileID{}, false // a file in the middle of the path
			}
			return FileID{Dev: uint64(st.Dev), Ino: st.Ino}, true
		default:
			unix.Close(fd)
			return FileID{}, false
		}
	}
	return FileID{}, false // the path names a folder
}

// safeFolder reports whether no user but the folder's owner (checked by the caller) and root
// can add, remove or rename its entries: writable by neither group nor others, or a root-owned
// sticky folder (/tmp), where an entry can be replaced only by its own owner.
func safeFolder(st *unix.Stat_t) bool {
	if st.Mode&0o022 == 0 {
		return true
	}
	return st.Uid == 0 && st.Mode&unix.S_ISVTX != 0
}

// readlinkFD reads the target of the symlink opened (O_PATH|O_NOFOLLOW) as fd.
func readlinkFD(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// maxCmdline bounds what is read of a command line.
const maxCmdline = 4096

func readCmdline(dir string) []string {
	f, err := os.Open(filepath.Join(dir, "cmdline"))
	if err != nil {
		return []string{}
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxCmdline))
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return []string{}
	}
	return strings.Split(string(b), "\x00")
}

// readExecdCmdline reads the command line of a process that runs an interpreter. A process
// caught inside execve, after the kernel has switched its executable but before it has laid out
// the new argument strings, shows an empty /proc/PID/cmdline; such a process is read again a few
// times, a millisecond apart, rather than taken for one that names no script.
func readExecdCmdline(dir string) []string {
	for i := 0; ; i++ {
		c := readCmdline(dir)
		if len(c) > 0 || i == 3 {
			return c
		}
		time.Sleep(time.Millisecond)
	}
}

// statFields returns the start time (field 22) and parent pid (field 4) of /proc/PID/stat.
func statFields(dir string) (start uint64, ppid int, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, errors.New("short stat")
	}
	ppid, _ = strconv.Atoi(f[1])
	start, err = strconv.ParseUint(f[19], 10, 64)
	return start, ppid, err
}

// Terminate kills the process of f with SIGKILL through a pidfd, after checking, with the pid
// pinned, that it is still the process found (same start time, same executable, still outside
// every box): a recycled pid is never signalled.
func (s Scanner) Terminate(f Finding) error {
	pid := f.Process.Pid
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	self, err := os.Readlink(filepath.Join(s.proc(), "self/ns/user"))
	if err != nil {
		return err
	}
	t, p, ok := s.match(pid, self, os.Getuid(), []Target{f.Target})
	if !ok || t.ID != f.Target.ID || p.StartTime != f.Process.StartTime {
		return fmt.Errorf("process %d is no longer the one found", pid)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		return fmt.Errorf("pidfd_send_signal %d: %w", pid, err)
	}
	return nil
}
