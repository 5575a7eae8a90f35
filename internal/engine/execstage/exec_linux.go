package execstage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/linux/caps"
	"github.com/agentbox/agentbox/internal/linux/fds"
	"github.com/agentbox/agentbox/internal/linux/landlock"
	"github.com/agentbox/agentbox/internal/linux/seccomp"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/warmup"
)

// execFailure is what box-exec reports on its exec socket when it cannot exec the program.
type execFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (f *execFailure) event() engine.Event {
	return engine.Event{Kind: engine.EventError, Code: f.Code, Message: f.Message}
}

// beforeReport, when not nil, runs in box-exec just before it writes its report of a failure
// (a test hook: the tests collect garbage there).
var beforeReport func()

// Process is a box-exec started by an engine's init ahead of its program (see Start).
type Process struct {
	pid       int
	conn      *os.File // box-init's end of the exec socket
	specSent  bool     // EventStart (the spec) has been sent
	builtSent bool     // EventBuilt has been sent
}

// Start starts `agentbox box-exec` as a child of the box's init (box-init, bwrap-init), early — before the box
// is built, and in a prestarted box-init before its request even came — so that its re-exec
// and Go start-up overlap box-init's own work and cost no launch any time. It waits on fd 3,
// its end of a SOCK_SEQPACKET socketpair, for the program's spec and streams (Run).
func Start() (*Process, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("exec socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "exec"), os.NewFile(uintptr(pair[1]), "exec-box")
	defer theirs.Close()
	proc, err := os.StartProcess("/proc/self/exe", []string{"agentbox", "box-exec"}, &os.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, theirs},
	})
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("start box-exec: %w", err)
	}
	pid := proc.Pid
	proc.Release() // reaped with wait4, as PID 1 reaps everything
	return &Process{pid: pid, conn: ours}, nil
}

// SendSpec hands box-exec the spec (raw bytes) as soon as box-init has it, so that it parses
// it and builds the program's seccomp filter while box-init builds the box. A failure box-exec
// reports is read by Run.
func (x *Process) SendSpec(raw []byte) error {
	if x.specSent {
		return nil
	}
	x.specSent = true
	specFile, err := fds.Sealed("agentbox-spec", raw)
	if err != nil {
		return err
	}
	defer specFile.Close()
	if err := engine.SendEvent(x.conn, engine.Event{Kind: engine.EventStart}, int(specFile.Fd())); err != nil {
		return fmt.Errorf("box-exec: %w", err)
	}
	return nil
}

// Built tells box-exec that the box is built (box-init is in the new root), so that it builds
// the program's Landlock ruleset, whose paths are the box's, while the box waits for its client.
func (x *Process) Built(raw []byte) error {
	if x.builtSent {
		return nil
	}
	if err := x.SendSpec(raw); err != nil {
		return err
	}
	x.builtSent = true
	if err := engine.SendEvent(x.conn, engine.Event{Kind: engine.EventBuilt}); err != nil {
		return fmt.Errorf("box-exec: %w", err)
	}
	return nil
}

// handOver hands box-exec the program's stdin, stdout and stderr (after the spec and the news that
// the box is built, sent now if they have not been), and waits until box-exec has exec'd the
// program (nil) or reported why it could not.
func (x *Process) handOver(raw []byte, stdio [3]int) *execFailure {
	defer x.conn.Close()
	// A box-exec that failed already has closed its end: its report is still to be read.
	sendErr := x.Built(raw)
	if sendErr == nil {
		sendErr = engine.SendEvent(x.conn, engine.Event{Kind: engine.EventGo}, stdio[0], stdio[1], stdio[2])
	}
	// The exec socket is close-on-exec in box-exec: end of file without a report means the
	// program's execve succeeded; otherwise box-exec wrote why it failed.
	buf := make([]byte, 64<<10)
	reset := false
	for {
		n, err := unix.Read(int(x.conn.Fd()), buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ECONNRESET) && !reset {
			// box-exec exited with a message of ours unread (it failed before it read the
			// streams): the kernel reports that once, then its report is still to be read.
			reset = true
			continue
		}
		if err != nil {
			return &execFailure{Code: engine.CodeBoxSetupFailed, Message: "box-exec: " + err.Error()}
		}
		if n == 0 {
			if reset {
				return &execFailure{Code: engine.CodeBoxSetupFailed, Message: "box-exec ended before the program without a report"}
			}
			if sendErr != nil {
				return &execFailure{Code: engine.CodeBoxSetupFailed, Message: "box-exec ended before the program: " + sendErr.Error()}
			}
			return nil
		}
		var f execFailure
		if json.Unmarshal(buf[:n], &f) != nil || f.Code == "" {
			f = execFailure{Code: engine.CodeBoxSetupFailed, Message: "box-exec: " + string(buf[:n])}
		}
		return &f
	}
}

// Main is the entry point of `agentbox box-exec`, started early by the box's init inside the
// box (Start). On fd 3 it gets the spec (EventStart, a memfd) as soon as box-init
// has it and builds the program's seccomp filter; once the box is built (EventBuilt) the
// program's Landlock ruleset; then it gets the program's stdin, stdout and stderr (EventGo). On this one thread it puts the streams in place (its own session with the PTY as
// controlling terminal in tty mode, its own process group otherwise), drops every capability,
// sets no_new_privs, applies Landlock and seccomp, and execs the program. On failure it
// reports on fd 3 and exits 1; on success fd 3 closes (close-on-exec). The program is then a
// child of an ordinary thread of box-init, in a Landlock domain of its own.
func Main(args []string) int {
	// Capabilities, no_new_privs and Landlock are per thread: all of it must happen on the
	// thread that calls execve.
	runtime.LockOSThread()
	if _, err := unix.FcntlInt(fdExec, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return 1 // no socket: box-init reports the missing exec as a setup failure
	}
	// conn must stay open until the execve closes it (close-on-exec) or the report is written
	// on it: an *os.File closes its descriptor once it is collected, and a collection after
	// the last receive closed the socket before a report written with the bare descriptor.
	// box-init then saw a message of its own unread (ECONNRESET) and the end of the socket,
	// and reported "ended before the program without a report" instead of the failure. So
	// fail writes through conn, and fail is used after the execve: conn is reachable until then.
	conn := os.NewFile(fdExec, "exec")
	fail := func(code string, format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		b, _ := json.Marshal(execFailure{Code: code, Message: msg})
		if beforeReport != nil {
			beforeReport()
		}
		if _, err := conn.Write(b); err != nil {
			// box-init then reports that box-exec ended without a report.
			fmt.Fprintf(os.Stderr, "agentbox box-exec: %s (and reporting it failed: %v)\n", msg, err)
		}
		return 1
	}
	receive := func(kind engine.EventKind, n int) ([]int, error) {
		ev, got, err := engine.RecvEvent(conn)
		if err != nil {
			return nil, err
		}
		if ev.Kind != kind || len(got) != n {
			for _, fd := range got {
				unix.Close(fd)
			}
			return nil, fmt.Errorf("box-exec: got %q with %d descriptors, want %q with %d", ev.Kind, len(got), kind, n)
		}
		return got, nil
	}
	warmup.Do(&spec.Spec{}) // box-exec starts early: this overlaps building the box, or waiting for a launch
	fdv, err := receive(engine.EventStart, 1)
	if errors.Is(err, engine.ErrControlClosed) {
		return 1 // box-init gave up before the program (a stopped or discarded box)
	}
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "%v", err)
	}
	raw, err := fds.ReadSpec(fdv[0])
	unix.Close(fdv[0])
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "box-exec: %v", err)
	}
	s, err := spec.Parse(raw)
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "box-exec: %v", err)
	}
	if s.Seccomp != spec.SeccompProfile {
		return fail(engine.CodeBoxSetupFailed, "seccomp: unknown seccomp profile %q", s.Seccomp)
	}
	filter, err := seccomp.Program()
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "seccomp: %v", err)
	}
	// The Landlock ruleset once the box is built (box-init is in the new root): its paths are
	// the box's own.
	if _, err = receive(engine.EventBuilt, 0); errors.Is(err, engine.ErrControlClosed) {
		return 1
	} else if err != nil {
		return fail(engine.CodeBoxSetupFailed, "%v", err)
	}
	ruleset, rulesetFlags, err := landlock.Ruleset(landlock.Policy(s.Landlock))
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "landlock: %v", err)
	}

	if fdv, err = receive(engine.EventGo, 3); errors.Is(err, engine.ErrControlClosed) {
		return 1
	} else if err != nil {
		return fail(engine.CodeBoxSetupFailed, "%v", err)
	}
	for i, fd := range fdv {
		if err := unix.Dup3(fd, i, 0); err != nil {
			return fail(engine.CodeBoxSetupFailed, "box-exec: stdio %d: %v", i, err)
		}
		if fd > 2 {
			unix.Close(fd)
		}
	}
	unix.Umask(0o022)
	if s.Console == plan.ConsoleTTY {
		if _, err := unix.Setsid(); err != nil {
			return fail(engine.CodeBoxSetupFailed, "setsid: %v", err)
		}
		if err := unix.IoctlSetInt(0, unix.TIOCSCTTY, 0); err != nil {
			return fail(engine.CodeBoxSetupFailed, "controlling terminal: %v", err)
		}
	} else if err := unix.Setpgid(0, 0); err != nil {
		return fail(engine.CodeBoxSetupFailed, "process group: %v", err)
	}
	// Nothing but stdio reaches the program (the ruleset's descriptor is close-on-exec).
	if err := unix.CloseRange(fdExec+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail(engine.CodeBoxSetupFailed, "close descriptors: %v", err)
	}
	if err := unix.Chdir(s.Cwd); err != nil {
		return fail(engine.CodeBoxSetupFailed, "chdir %s: %v", s.Cwd, err)
	}
	if err := capInotify(); err != nil {
		return fail(engine.CodeBoxSetupFailed, "inotify instances and watches: %v", err)
	}
	// The kernel counts the tasks of the program's uid in the box's user namespace against it;
	// raising it again needs CAP_SYS_RESOURCE in the host's user namespace, which no box has.
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: uint64(s.MaxProcs), Max: uint64(s.MaxProcs)}); err != nil {
		return fail(engine.CodeBoxSetupFailed, "process limit %d: %v", s.MaxProcs, err)
	}
	if err := caps.DropAll(); err != nil {
		return fail(engine.CodeBoxSetupFailed, "drop capabilities: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(engine.CodeBoxSetupFailed, "no_new_privs: %v", err)
	}
	if err := landlock.RestrictSelf(ruleset, rulesetFlags); err != nil {
		return fail(engine.CodeBoxSetupFailed, "landlock: restrict self: %v", err)
	}
	unix.Close(ruleset)
	if err := seccomp.Load(filter, unix.SECCOMP_FILTER_FLAG_TSYNC); err != nil {
		return fail(engine.CodeBoxSetupFailed, "seccomp: %v", err)
	}
	// The program starts with every signal at its default action: an ignored disposition would
	// survive the execve (the shim ignores SIGHUP and SIGPIPE, and box-exec may start before
	// box-init takes them over), and a shell cannot trap a signal ignored on entry.
	defaultSignals()
	argv := append([]string{s.Program}, s.Args...)
	err = syscall.Exec(s.Program, argv, s.Env)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return fail(engine.CodeProgramNotFound, "%s: %v", s.Program, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.ENOEXEC), errors.Is(err, unix.EPERM),
		errors.Is(err, unix.EISDIR), errors.Is(err, unix.ETXTBSY), errors.Is(err, unix.ELIBBAD):
		return fail(engine.CodeProgramNotExec, "%s: %v", s.Program, err)
	}
	return fail(engine.CodeBoxSetupFailed, "exec %s: %v", s.Program, err)
}

// kernelSigaction is the kernel's struct sigaction (the layout of x86-64 and arm64).
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// defaultSignals sets every catchable signal's action to SIG_DFL for the whole process. Only
// for the instant before execve: the Go runtime's own handlers are gone with it.
func defaultSignals() {
	var dfl kernelSigaction // SIG_DFL is 0
	for sig := 1; sig <= 64; sig++ {
		if sig == int(unix.SIGKILL) || sig == int(unix.SIGSTOP) {
			continue
		}
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	}
}
