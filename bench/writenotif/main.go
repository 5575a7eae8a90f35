//go:build linux && amd64

// Command writenotif measures what the cheapest candidate for closing the window after a host
// replacement of a protected file (issue #20 item 3, docs/integrity.md) would cost file-heavy
// work: a seccomp filter that turns every open for writing (openat with O_WRONLY, O_RDWR,
// O_CREAT, O_TRUNC or O_APPEND) into a user notification, answered by a supervisor outside the
// filter. It runs one workload — create -files files of -size bytes in a fresh folder, then
// read each back — in a child process, three ways, alternating, -rounds times:
//
//   - plain: no filter;
//   - continue: the supervisor answers each notification SECCOMP_USER_NOTIF_FLAG_CONTINUE (the
//     round trip alone: a lower bound, and no check at all, since the path can change after the
//     supervisor looked at it);
//   - addfd: the supervisor performs the open itself — the path read from the caller's memory,
//     resolved from the caller's working folder (/proc/PID/cwd) — and injects the descriptor
//     (SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SEND), what a sound design must do;
//   - addfd-excl: as addfd, but the filter lets an open with both O_CREAT and O_EXCL pass in the
//     kernel (it makes a new inode or fails, so it can never open the host's new file): only
//     the opens that may reach an existing file are notified (protect5's variant).
//
// With -excl the workload creates its files with O_CREAT|O_EXCL, as git does for the files of a
// checkout, its objects and its lock files; without, with O_CREAT|O_TRUNC, as Node's
// fs.writeFile (npm) and Go's os.Create do.
//
// It prints the median of each way. Linux 5.14 or later (ADDFD_FLAG_SEND), amd64. Runs of more
// than one round at 2,000 files hung twice on the loaded test machine (a child that never
// ended; not investigated): the figures in docs/benchmarks.md are from one round per process.
//
//	TMPDIR=/dev/shm go run ./bench/writenotif -files 2000 -size 4096 -rounds 1
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

type notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

type notifAddfd struct {
	ID         uint64
	Flags      uint32
	Srcfd      uint32
	Newfd      uint32
	NewfdFlags uint32
}

const writeFlags = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC | unix.O_APPEND

// excl says the workload creates its files with O_CREAT|O_EXCL.
var excl bool

// notified counts the notifications the supervisor answered, over all runs of a way.
var notified atomic.Int64

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Exit(child(os.Args[2:]))
	}
	files := flag.Int("files", 5000, "files the workload creates and reads back")
	size := flag.Int("size", 4096, "bytes per file")
	rounds := flag.Int("rounds", 1, "rounds of the ways")
	flag.BoolVar(&excl, "excl", false, "create the files with O_CREAT|O_EXCL (as git does) instead of O_CREAT|O_TRUNC")
	flag.Parse()
	ways := []string{"plain", "continue", "addfd", "addfd-excl"}
	took := map[string][]time.Duration{}
	notes := map[string]int64{}
	for r := 0; r < *rounds; r++ {
		for i := range ways {
			way := ways[(i+r)%len(ways)] // rotated order
			before := notified.Load()
			d, err := run(way, *files, *size)
			notes[way] += notified.Load() - before
			if err != nil {
				fmt.Fprintf(os.Stderr, "writenotif: %s: %v\n", way, err)
				os.Exit(1)
			}
			took[way] = append(took[way], d)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("%d files of %d bytes (created with O_EXCL: %v), %d rounds, load average %s\n", *files, *size, excl, *rounds, strings.Fields(string(load))[0])
	base := median(took["plain"])
	for _, way := range ways {
		m := median(took[way])
		fmt.Printf("%-10s median %8.1f ms  %.2fx plain  %d notifications  (%v)\n", way, ms(m), float64(m)/float64(base), notes[way], took[way])
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// run starts the child for one way, supervises it, and returns the workload's duration as the
// child measured it.
func run(way string, files, size int) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "writenotif")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	mine, theirs := os.NewFile(uintptr(sp[0]), "sup"), os.NewFile(uintptr(sp[1]), "child")
	defer mine.Close()
	var out bytes.Buffer
	cmd := exec.Command("/proc/self/exe", "child", way, strconv.Itoa(files), strconv.Itoa(size), strconv.FormatBool(excl))
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = dir, &out, os.Stderr, []*os.File{theirs}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	theirs.Close()
	if way != "plain" {
		listener, err := recvFD(int(mine.Fd()))
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return 0, err
		}
		go supervise(listener, way != "continue", &notified)
		defer unix.Close(listener)
	}
	if _, err := mine.Write([]byte{1}); err != nil {
		return 0, err
	}
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("child: %w", err)
	}
	return time.ParseDuration(strings.TrimSpace(out.String()))
}

func recvFD(sock int) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(sock, make([]byte, 1), oob, 0)
	if err != nil {
		return -1, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("no listener descriptor: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("no listener descriptor: %v", err)
	}
	return fds[0], nil
}

// supervise answers the notifications until the listener ends (the child exited).
func supervise(listener int, addfd bool, count *atomic.Int64) {
	runtime.LockOSThread()
	path := make([]byte, 4096)
	for {
		var n notif
		if err := ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		count.Add(1)
		if !addfd {
			resp := notifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
			ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
			continue
		}
		errno := openFor(listener, &n, path)
		if errno != 0 {
			resp := notifResp{ID: n.ID, Error: -int32(errno)}
			ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
		}
	}
}

// openFor performs the caller's openat itself and injects the descriptor, which answers the
// call; it returns an errno to answer with instead.
func openFor(listener int, n *notif, buf []byte) unix.Errno {
	pid := int(n.Pid)
	mem, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/mem", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return unix.EPERM
	}
	k, err := unix.Pread(mem, buf, int64(n.Args[1]))
	unix.Close(mem)
	if err != nil || k == 0 {
		return unix.EFAULT
	}
	end := bytes.IndexByte(buf[:k], 0)
	if end < 0 {
		return unix.ENAMETOOLONG
	}
	p := string(buf[:end])
	// The memory read may have raced with the caller's end: the notification must still be live.
	id := n.ID
	if ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id)) != nil {
		return unix.ENOENT
	}
	if int32(n.Args[0]) != unix.AT_FDCWD {
		return unix.ENOSYS // a directory descriptor would be fetched with pidfd_getfd: not measured
	}
	if !filepath.IsAbs(p) {
		p = "/proc/" + strconv.Itoa(pid) + "/cwd/" + p
	}
	flags := int(n.Args[2])
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, uint32(n.Args[3]))
	if err != nil {
		return err.(unix.Errno)
	}
	defer unix.Close(fd)
	add := notifAddfd{ID: n.ID, Flags: unix.SECCOMP_ADDFD_FLAG_SEND, Srcfd: uint32(fd)}
	if flags&unix.O_CLOEXEC != 0 {
		add.NewfdFlags = unix.O_CLOEXEC
	}
	if err := ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_ADDFD, unsafe.Pointer(&add)); err != nil {
		return 0 // the call was answered or is gone
	}
	return 0
}

func ioctl(fd int, req uint, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// child installs the filter on its one locked thread (the workload's), hands the listener to
// the supervisor, waits for its go, and runs the workload on that thread, printing how long it
// took.
func child(args []string) int {
	runtime.LockOSThread()
	way := args[0]
	files, _ := strconv.Atoi(args[1])
	size, _ := strconv.Atoi(args[2])
	create := unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC
	if args[3] == "true" {
		create = unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL
	}
	if way != "plain" {
		listener, err := install(way == "addfd-excl")
		if err != nil {
			fmt.Fprintf(os.Stderr, "install filter: %v\n", err)
			return 1
		}
		if err := unix.Sendmsg(3, []byte{0}, unix.UnixRights(listener), nil, 0); err != nil {
			fmt.Fprintf(os.Stderr, "send listener: %v\n", err)
			return 1
		}
		unix.Close(listener)
	}
	var b [1]byte
	if _, err := unix.Read(3, b[:]); err != nil {
		return 1
	}
	data := bytes.Repeat([]byte("x"), size)
	if err := unix.Mkdir("w", 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	t0 := time.Now()
	for i := 0; i < files; i++ {
		fd, err := unix.Openat(unix.AT_FDCWD, "w/f"+strconv.Itoa(i), create|unix.O_CLOEXEC, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "create: %v\n", err)
			return 1
		}
		if _, err := unix.Write(fd, data); err != nil {
			fmt.Fprintf(os.Stderr, "write: %v\n", err)
			return 1
		}
		unix.Close(fd)
	}
	buf := make([]byte, size)
	for i := 0; i < files; i++ {
		fd, err := unix.Openat(unix.AT_FDCWD, "w/f"+strconv.Itoa(i), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "open: %v\n", err)
			return 1
		}
		unix.Read(fd, buf)
		unix.Close(fd)
	}
	fmt.Println(time.Since(t0))
	return 0
}

// install puts a filter on this thread that notifies on openat with a write flag (with
// exemptExcl, not when both O_CREAT and O_EXCL are set), and returns its listener.
func install(exemptExcl bool) (int, error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, err
	}
	const createExcl = unix.O_CREAT | unix.O_EXCL
	excl := unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA} // a no-op unless exemptExcl
	if exemptExcl {
		excl = unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 3, Jf: 0, K: createExcl} // to allow
	}
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4},                                     // arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 8, K: unix.AUDIT_ARCH_X86_64}, // else allow
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0},                                     // nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 6, K: unix.SYS_OPENAT},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 32}, // args[2], low half: the flags
		{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: createExcl},
		excl,
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 32},
		{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, Jt: 0, Jf: 1, K: writeFlags},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_USER_NOTIF},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, e := unix.Syscall(unix.SYS_SECCOMP, 1 /* SECCOMP_SET_MODE_FILTER */, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}
