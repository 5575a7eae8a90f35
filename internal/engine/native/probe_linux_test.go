package native_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nativeProbe runs inside a box as the program (argv: native-probe NAME [ARG]) and prints its
// findings as JSON.
func nativeProbe(args []string) int {
	if len(args) == 0 {
		return 2
	}
	var out any
	var err error
	switch args[0] {
	case "restrictions":
		out = probeRestrictions()
	case "forward":
		out, err = probeForward(args[1])
	case "abstract":
		out = errName(connectAbstract(args[1]))
	case "write":
		out = errName(os.WriteFile(args[1], []byte("x"), 0o644))
	case "mkdir":
		out = errName(os.Mkdir(args[1], 0o755))
	case "read":
		var b []byte
		b, err = os.ReadFile(args[1])
		out = string(b)
	case "proc-others":
		out, err = probeProcOthers()
	case "slow-writers":
		return leaveWriters("slow-writer", args[1])
	case "slow-writer":
		return slowWriter(args[1])
	case "leader-exit-writers":
		return leaveWriters("leader-exit-writer", args[1])
	case "leader-exit-writer":
		return leaderExitWriter(args[1])
	default:
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// errName is "ok" for nil, else the errno's name (EPERM), else the error text.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func rawErr(_, _ uintptr, e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	return unix.ErrnoName(e)
}

func probeRestrictions() map[string]string {
	r := map[string]string{}
	status, _ := os.ReadFile("/proc/self/status")
	sc := bufio.NewScanner(strings.NewReader(string(status)))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		switch k {
		case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp":
			r[k] = strings.TrimSpace(v)
		}
	}
	sock := func(domain, typ, proto uint64) string {
		fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(domain), uintptr(typ), uintptr(proto))
		if e == 0 {
			unix.Close(int(fd))
		}
		return rawErr(0, 0, e)
	}
	r["socket/unix"] = sock(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	r["socket/inet"] = sock(unix.AF_INET, unix.SOCK_STREAM, 0)
	r["socket/netlink-route"] = sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	r["socket/netlink-audit"] = sock(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)
	r["socket/packet"] = sock(unix.AF_PACKET, unix.SOCK_RAW, 0)
	r["socket/unix-highbits"] = sock(1<<32|unix.AF_UNIX, unix.SOCK_STREAM, 0)

	// TIOCSTI on a pipe would fail with ENOTTY if the filter let it through.
	c := byte('x')
	r["ioctl/tiocsti"] = rawErr(unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c))))
	r["ioctl/tiocsti-highbits"] = rawErr(unix.Syscall(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c))))
	r["ioctl/tioclinux"] = rawErr(unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&c))))
	var ws unix.Winsize
	r["ioctl/tiocgwinsz"] = rawErr(unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws))))

	f := "/tmp/probe-file"
	os.WriteFile(f, nil, 0o644)
	r["chmod/0755"] = errName(unix.Chmod(f, 0o755))
	r["chmod/4755"] = errName(unix.Chmod(f, 0o4755))
	r["fchmodat/2755"] = errName(unix.Fchmodat(unix.AT_FDCWD, f, 0o2755, 0))
	fd, err := unix.Open(f, unix.O_RDONLY, 0)
	if err == nil {
		r["fchmod/4755"] = errName(unix.Fchmod(fd, 0o4755))
		unix.Close(fd)
	}
	fd, err = unix.Openat(unix.AT_FDCWD, "/tmp/probe-setuid", unix.O_CREAT|unix.O_WRONLY, 0o4755)
	if err == nil {
		unix.Close(fd)
	}
	r["openat/create-4755"] = errName(err)
	fd, err = unix.Openat(unix.AT_FDCWD, "/tmp/probe-plain", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err == nil {
		unix.Close(fd)
	}
	r["openat/create-0644"] = errName(err)
	r["mknodat/fifo-4644"] = errName(unix.Mknodat(unix.AT_FDCWD, "/tmp/probe-fifo", unix.S_IFIFO|0o4644, 0))

	// CLONE_NEWUSER|CLONE_FS is EINVAL in the kernel: only the filter can make it EPERM, and no
	// process is ever created either way.
	r["clone/newuser"] = rawErr(unix.RawSyscall(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_FS, 0, 0))
	r["clone/newns"] = rawErr(unix.RawSyscall(unix.SYS_CLONE, unix.CLONE_NEWNS|unix.CLONE_FS, 0, 0))
	r["unshare/user"] = errName(unix.Unshare(unix.CLONE_NEWUSER))
	r["clone3"] = rawErr(unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0))
	r["openat2"] = rawErr(unix.RawSyscall6(unix.SYS_OPENAT2, 0, 0, 0, 0, 0, 0))
	r["io_uring_setup"] = rawErr(unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, 0, 0))
	r["ptrace/traceme"] = rawErr(unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0))
	r["keyctl"] = rawErr(unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffd), 0))
	r["mount"] = errName(unix.Mount("none", "/tmp", "tmpfs", 0, ""))
	if pidfd, err := unix.PidfdOpen(os.Getpid(), 0); err == nil {
		r["pidfd_getfd"] = rawErr(unix.RawSyscall(unix.SYS_PIDFD_GETFD, uintptr(pidfd), 0, 0))
		unix.Close(pidfd)
	} else {
		r["pidfd_getfd"] = "pidfd_open: " + errName(err)
	}
	buf := make([]byte, 8)
	local := []unix.Iovec{{Base: &buf[0], Len: 8}}
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&buf[0])), Len: 8}}
	_, err = unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
	r["process_vm_readv"] = errName(err)
	r["x32/getpid"] = rawErr(unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0))
	// box-init is outside the program's Landlock domain: signals to it are scoped away.
	r["kill/init"] = errName(unix.Kill(1, 0))
	return r
}

// procSensitive are the entries of /proc/<pid> that reveal a process's descriptors, memory,
// environment or filesystem view. Directories are listed, links read, files opened.
var procSensitive = []string{"fd", "fdinfo", "map_files", "environ", "mem", "maps", "smaps", "auxv",
	"syscall", "stack", "pagemap", "exe", "cwd", "root", "fd/0", "fd/3", "fd/4", "fdinfo/0", "fdinfo/3"}

// probeProcOthers tries /proc/<pid>/<entry> (procSensitive) of every process and thread of the
// box that is not the probe's own: box-init (pid 1), each of its threads by its own /proc/<tid>
// and under /proc/1/task/<tid>, and any pid up to well past the probe's. It returns the
// controls that worked (entries of the probe's own and of a child's; any failing is an error)
// and what succeeded elsewhere ("breaches", empty when everything was refused or invisible).
func probeProcOthers() (map[string][]string, error) {
	self := os.Getpid()
	own := func() map[int]bool {
		m := map[int]bool{}
		ents, _ := os.ReadDir("/proc/self/task")
		for _, e := range ents {
			if n, err := strconv.Atoi(e.Name()); err == nil {
				m[n] = true
			}
		}
		return m
	}
	try := func(p string) error {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			_, err = os.Readlink(p)
		case fi.IsDir():
			_, err = os.ReadDir(p)
		default:
			var f *os.File
			if f, err = os.Open(p); err == nil {
				_, err = f.Read(make([]byte, 64))
				if errors.Is(err, io.EOF) {
					err = nil
				}
				f.Close()
			}
		}
		return err
	}
	// Controls: the probe's own entries, and those of a child it starts (the program's own
	// processes must stay visible to it: ps, a debugger's attach list).
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		return nil, fmt.Errorf("start a child: %w", err)
	}
	defer child.Wait()
	defer child.Process.Kill()
	out := map[string][]string{"control": nil, "breaches": nil}
	for _, d := range []string{"/proc/self", "/proc/" + strconv.Itoa(child.Process.Pid)} {
		for _, e := range []string{"fd", "fdinfo", "environ", "maps", "exe", "cwd"} {
			if err := try(d + "/" + e); err != nil {
				return nil, fmt.Errorf("control %s/%s: %w", d, e, err)
			}
			out["control"] = append(out["control"], d+"/"+e)
		}
	}
	seen := map[string]bool{}
	var dirs []string
	add := func(d string) {
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	add("/proc/1")
	if ents, err := os.ReadDir("/proc/1/task"); err == nil {
		for _, e := range ents {
			add("/proc/1/task/" + e.Name())
			add("/proc/" + e.Name())
		}
	}
	mine := own()
	for n := 2; n < self+256; n++ {
		if !mine[n] && n != child.Process.Pid {
			add("/proc/" + strconv.Itoa(n))
		}
	}
	mine = own() // threads the runtime started meanwhile are the probe's too
	for _, d := range dirs {
		if n, err := strconv.Atoi(strings.TrimPrefix(d, "/proc/")); err == nil && (mine[n] || n == child.Process.Pid) {
			continue
		}
		for _, e := range procSensitive {
			if err := try(d + "/" + e); err == nil {
				out["breaches"] = append(out["breaches"], d+"/"+e)
			}
		}
	}
	return out, nil
}

func connectAbstract(name string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + name})
}

func probeForward(addr string) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		return "", err
	}
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	return string(b), err
}

// leaveWriters leaves two writer processes behind (the probe named: slow-writer,
// leader-exit-writer), each in a session of its own, and exits 3 once both write file.N.
func leaveWriters(writer, file string) int {
	for i := 0; i < 2; i++ {
		mark := fmt.Sprintf("%s.%d", file, i)
		p, err := os.StartProcess("/proc/self/exe", []string{"probe", "native-probe", writer, mark},
			&os.ProcAttr{Sys: &syscall.SysProcAttr{Setsid: true}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		p.Release()
	}
	for i := 0; i < 2; i++ {
		for {
			if st, err := os.Stat(fmt.Sprintf("%s.%d", file, i)); err == nil && st.Size() > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return 3
}

// slowWriter ignores SIGTERM, SIGHUP and SIGINT, takes 10 inotify instances with a watch each
// (their release makes its death, even by SIGKILL, take a grace period each: milliseconds),
// and appends to file until it is killed.
func slowWriter(file string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	for i := 0; i < 10; i++ {
		fd, err := unix.InotifyInit1(0)
		if err != nil {
			break
		}
		unix.InotifyAddWatch(fd, ".", unix.IN_CREATE)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 1
	}
	for {
		f.WriteString("x\n")
	}
}

// init keeps a leader-exit-writer's main goroutine on the process's first thread, its thread
// group's leader (the runtime runs init there), so that it can end that thread alone.
func init() {
	if len(os.Args) > 2 && os.Args[1] == "native-probe" && os.Args[2] == "leader-exit-writer" {
		runtime.LockOSThread()
	}
}

// leaderExitWriter is a slow writer (slowWriter: signals ignored, 10 inotify instances,
// appending to file) on a thread of its own, whose thread group's leader then exits alone
// (exit(2), not exit_group): /proc shows the process as a zombie while its writer runs.
func leaderExitWriter(file string) int {
	if unix.Gettid() != unix.Getpid() {
		fmt.Fprintln(os.Stderr, "leader-exit-writer: not on the leader thread")
		return 1
	}
	go slowWriter(file)
	for {
		if st, err := os.Stat(file); err == nil && st.Size() > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	syscall.Syscall(unix.SYS_EXIT, 0, 0, 0) // this thread only; the writer runs on
	return 1
}
