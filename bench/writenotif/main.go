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
// It prints the median of each way. Linux 5.14 or later (ADDFD_FLAG_SEND), amd64.
//
// Both threads of a notification block every asynchronous signal while they take part (see
// blockSignals): the Go runtime preempts a goroutine that has run for 10 ms by sending its thread
// SIGURG, and a signal breaks the protocol at either end. A signal to the workload's thread while
// its openat waits withdraws the notification and restarts the call: a second notification for
// the same open (after an addfd that already created the file with O_EXCL, the restart fails
// with EEXIST), and, if the supervisor had not yet received the first, a RECV that finds nothing
// and fails with ENOENT; the supervisor used to end on that error, and the child then waited for
// an answer forever (the hang of earlier runs, "not investigated"). A signal to the supervisor's
// thread during an ADDFD with ADDFD_FLAG_SEND, once the kernel has marked the call answered, makes
// the ioctl take its request back before the descriptor was installed and restart (SA_RESTART),
// but the call stays answered, with 0: the workload's openat returns its stdin, read-only, and
// the write fails, "bad file descriptor". Each child also has a time limit (-timeout), so a run
// that still goes wrong ends with an error instead of hanging.
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

// timeout limits one child's life.
var timeout time.Duration

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Exit(child(os.Args[2:]))
	}
	files := flag.Int("files", 5000, "files the workload creates and reads back")
	size := flag.Int("size", 4096, "bytes per file")
	rounds := flag.Int("rounds", 1, "rounds of the ways")
	flag.DurationVar(&timeout, "timeout", 2*time.Minute, "time limit of one child (the workload once, one way); it is killed after")
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
	var hung atomic.Bool
	watchdog := time.AfterFunc(timeout, func() { hung.Store(true); cmd.Process.Kill() })
	defer watchdog.Stop()
	var supervised chan error
	if way != "plain" {
		listener, err := recvFD(int(mine.Fd()))
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return 0, err
		}
		// The supervisor owns the listener and closes it when it ends: closed here, its number
		// could be reused (by the next run's listener) while the supervisor still calls on it.
		supervised = make(chan error, 1)
		go func() {
			err := supervise(listener, way != "continue", &notified)
			if err != nil {
				cmd.Process.Kill() // its next notified open would wait forever
			}
			supervised <- err
		}()
	}
	if _, err := mine.Write([]byte{1}); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, err
	}
	werr := cmd.Wait()
	var serr error
	if supervised != nil {
		select {
		case serr = <-supervised:
		case <-time.After(time.Second):
			// The listener reports the child's end (POLLHUP) to the supervisor; a kernel that
			// leaves a RECV blocked past it leaves the supervisor parked there, harmless.
		}
	}
	switch {
	case hung.Load():
		return 0, fmt.Errorf("child did not finish within %v (killed); supervisor: %v", timeout, serr)
	case serr != nil:
		return 0, fmt.Errorf("supervisor: %w (child: %v)", serr, werr)
	case werr != nil:
		return 0, fmt.Errorf("child: %w", werr)
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

// supervise answers the notifications until the listener reports that the child is gone
// (POLLHUP), then closes the listener; it returns an error if it had to stop before.
func supervise(listener int, addfd bool, count *atomic.Int64) error {
	defer unix.Close(listener)
	// Never unlocked: the thread, its signal mask changed, ends with this goroutine (the main
	// thread, which Go does not end, is parked for good instead).
	runtime.LockOSThread()
	if err := blockSignals(); err != nil {
		return err
	}
	path := make([]byte, 4096)
	for {
		var n notif
		if err := ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
			switch err {
			case unix.EINTR:
				continue
			case unix.ENOENT:
				// The notification this RECV was woken for is gone: its call was interrupted
				// before we received it (it is restarted, and notified again), or the child
				// ended. Only the listener tells which.
				gone, err := childGone(listener)
				if gone || err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("SECCOMP_IOCTL_NOTIF_RECV: %w", err)
		}
		count.Add(1)
		if !addfd {
			resp := notifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
			if err := send(listener, &resp); err != nil {
				return err
			}
			continue
		}
		if errno := openFor(listener, &n, path); errno != 0 {
			resp := notifResp{ID: n.ID, Error: -int32(errno)}
			if err := send(listener, &resp); err != nil {
				return err
			}
		}
	}
}

// send answers a notification; a call that is gone (ENOENT: interrupted, or its process ended)
// needs no answer.
func send(listener int, resp *notifResp) error {
	for {
		err := ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(resp))
		switch err {
		case nil, unix.ENOENT:
			return nil
		case unix.EINTR:
			continue
		}
		return fmt.Errorf("SECCOMP_IOCTL_NOTIF_SEND: %w", err)
	}
}

// childGone waits until the listener has a notification to receive (false) or its filter has no
// process left (true).
func childGone(listener int) (bool, error) {
	for {
		fds := []unix.PollFd{{Fd: int32(listener), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return false, fmt.Errorf("poll listener: %w", err)
		}
		switch {
		case fds[0].Revents&unix.POLLIN != 0:
			return false, nil
		case fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0:
			return true, nil
		}
	}
}

// openFor performs the caller's openat itself and injects the descriptor, which answers the
// call; it returns an errno to answer with instead, or 0 if the call needs no (other) answer.
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
		return 0 // gone: nothing to answer
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
	switch err := ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_ADDFD, unsafe.Pointer(&add)); err {
	case nil:
		return 0 // injected, and the call answered with it
	case unix.ENOENT, unix.EINPROGRESS, unix.ESRCH:
		return 0 // the call is gone, or already answered
	default:
		// Not injected (EMFILE, say): the kernel left the call waiting for an answer.
		return err.(unix.Errno)
	}
}

// blockSignals blocks every asynchronous signal on the calling thread, which must be locked to
// its goroutine (the synchronous ones, which the Go runtime turns into panics, stay open). Neither
// side of a notification may be interrupted (see the comment at the top): the Go runtime preempts
// a goroutine by sending its thread SIGURG, which now waits, pending, until the thread ends; the
// goroutine is still preempted at its next function call. SIGKILL cannot be blocked.
func blockSignals() error {
	var set unix.Sigset_t
	set.Val[0] = ^uint64(0)
	for _, sig := range []unix.Signal{unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGTRAP, unix.SIGSYS} {
		set.Val[0] &^= 1 << (uint(sig) - 1)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
		return fmt.Errorf("block signals: %w", err)
	}
	return nil
}

func ioctl(fd int, req uint, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// child installs the filter on its one locked thread (the workload's), hands the listener to
// the supervisor, waits for its go, and runs the workload on that thread, printing how long it
// took. The other threads of the Go runtime have no filter: LockOSThread started the template
// thread, from which the runtime clones every thread it needs later, before the filter.
func child(args []string) int {
	runtime.LockOSThread()
	// Every way, plain too, so that they differ only in the filter.
	if err := blockSignals(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
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
