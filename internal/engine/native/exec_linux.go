package native

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/plan"
)

// execFailure is what box-exec reports on its exec socket when it cannot exec the program.
type execFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (f *execFailure) event() engine.Event {
	return engine.Event{Kind: engine.EventError, Code: f.Code, Message: f.Message}
}

// execProcess is a box-exec started by box-init ahead of its program (see startExecProcess).
type execProcess struct {
	pid       int
	conn      *os.File // box-init's end of the exec socket
	specSent  bool     // EventStart (the spec) has been sent
	builtSent bool     // EventBuilt has been sent
}

// startExecProcess starts `agentbox box-exec` as a child of box-init, early — before the box
// is built, and in a prestarted box-init before its request even came — so that its re-exec
// and Go start-up overlap box-init's own work and cost no launch any time. It waits on fd 3,
// its end of a SOCK_SEQPACKET socketpair, for the program's spec and streams (run).
func startExecProcess() (*execProcess, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("exec socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "exec"), os.NewFile(uintptr(fds[1]), "exec-box")
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
	return &execProcess{pid: pid, conn: ours}, nil
}

// sendSpec hands box-exec the spec (raw bytes) as soon as box-init has it, so that it parses
// it and builds the program's seccomp filter while box-init builds the box. A failure box-exec
// reports is read by run.
func (x *execProcess) sendSpec(raw []byte) error {
	if x.specSent {
		return nil
	}
	x.specSent = true
	specFile, err := memfile("agentbox-spec", raw)
	if err != nil {
		return err
	}
	defer specFile.Close()
	if err := engine.SendEvent(x.conn, engine.Event{Kind: engine.EventStart}, int(specFile.Fd())); err != nil {
		return fmt.Errorf("box-exec: %w", err)
	}
	return nil
}

// built tells box-exec that the box is built (box-init is in the new root), so that it builds
// the program's Landlock ruleset, whose paths are the box's, while the box waits for its client.
func (x *execProcess) built(raw []byte) error {
	if x.builtSent {
		return nil
	}
	if err := x.sendSpec(raw); err != nil {
		return err
	}
	x.builtSent = true
	if err := engine.SendEvent(x.conn, engine.Event{Kind: engine.EventBuilt}); err != nil {
		return fmt.Errorf("box-exec: %w", err)
	}
	return nil
}

// run hands box-exec the program's stdin, stdout and stderr (after the spec and the news that
// the box is built, sent now if they have not been), and waits until box-exec has exec'd the
// program (nil) or reported why it could not.
func (x *execProcess) run(raw []byte, stdio [3]int) *execFailure {
	defer x.conn.Close()
	// A box-exec that failed already has closed its end: its report is still to be read.
	sendErr := x.built(raw)
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

// BoxExecMain is the entry point of `agentbox box-exec`, started early by box-init inside the
// box (startExecProcess). On fd 3 it gets the spec (EventStart, a memfd) as soon as box-init
// has it and builds the program's seccomp filter; once the box is built (EventBuilt) the
// program's Landlock ruleset; then it gets the program's stdin, stdout and stderr (EventGo). On this one thread it puts the streams in place (its own session with the PTY as
// controlling terminal in tty mode, its own process group otherwise), drops every capability,
// sets no_new_privs, applies Landlock and seccomp, and execs the program. On failure it
// reports on fd 3 and exits 1; on success fd 3 closes (close-on-exec). The program is then a
// child of an ordinary thread of box-init, in a Landlock domain of its own.
func BoxExecMain(args []string) int {
	// Capabilities, no_new_privs and Landlock are per thread: all of it must happen on the
	// thread that calls execve.
	runtime.LockOSThread()
	if _, err := unix.FcntlInt(fdExec, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return 1 // no socket: box-init reports the missing exec as a setup failure
	}
	conn := os.NewFile(fdExec, "exec")
	fail := func(code string, format string, a ...any) int {
		b, _ := json.Marshal(execFailure{Code: code, Message: fmt.Sprintf(format, a...)})
		unix.Write(fdExec, b)
		return 1
	}
	receive := func(kind engine.EventKind, n int) ([]int, error) {
		ev, fds, err := engine.RecvEvent(conn)
		if err != nil {
			return nil, err
		}
		if ev.Kind != kind || len(fds) != n {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, fmt.Errorf("box-exec: got %q with %d descriptors, want %q with %d", ev.Kind, len(fds), kind, n)
		}
		return fds, nil
	}
	WarmUp() // box-exec starts early: this overlaps building the box, or waiting for a launch
	fds, err := receive(engine.EventStart, 1)
	if errors.Is(err, engine.ErrControlClosed) {
		return 1 // box-init gave up before the program (a stopped or discarded box)
	}
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "%v", err)
	}
	raw, err := readSpecFD(fds[0])
	unix.Close(fds[0])
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "box-exec: %v", err)
	}
	spec, err := ParseSpec(raw)
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "box-exec: %v", err)
	}
	filter, err := seccompProgram(spec.Seccomp)
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
	ruleset, rulesetFlags, err := landlockRuleset(spec.Landlock)
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "landlock: %v", err)
	}

	if fds, err = receive(engine.EventGo, 3); errors.Is(err, engine.ErrControlClosed) {
		return 1
	} else if err != nil {
		return fail(engine.CodeBoxSetupFailed, "%v", err)
	}
	for i, fd := range fds {
		if err := unix.Dup3(fd, i, 0); err != nil {
			return fail(engine.CodeBoxSetupFailed, "box-exec: stdio %d: %v", i, err)
		}
		if fd > 2 {
			unix.Close(fd)
		}
	}
	unix.Umask(0o022)
	if spec.Console == plan.ConsoleTTY {
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
	if err := unix.Chdir(spec.Cwd); err != nil {
		return fail(engine.CodeBoxSetupFailed, "chdir %s: %v", spec.Cwd, err)
	}
	// The kernel counts the tasks of the program's uid in the box's user namespace against it;
	// raising it again needs CAP_SYS_RESOURCE in the host's user namespace, which no box has.
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: uint64(spec.MaxProcs), Max: uint64(spec.MaxProcs)}); err != nil {
		return fail(engine.CodeBoxSetupFailed, "process limit %d: %v", spec.MaxProcs, err)
	}
	if err := dropCapabilities(); err != nil {
		return fail(engine.CodeBoxSetupFailed, "drop capabilities: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(engine.CodeBoxSetupFailed, "no_new_privs: %v", err)
	}
	if err := ll.LandlockRestrictSelf(ruleset, rulesetFlags); err != nil {
		return fail(engine.CodeBoxSetupFailed, "landlock: restrict self: %v", err)
	}
	unix.Close(ruleset)
	if err := loadSeccomp(filter, unix.SECCOMP_FILTER_FLAG_TSYNC); err != nil {
		return fail(engine.CodeBoxSetupFailed, "seccomp: %v", err)
	}
	// The program starts with every signal at its default action: an ignored disposition would
	// survive the execve (the shim ignores SIGHUP and SIGPIPE, and box-exec may start before
	// box-init takes them over), and a shell cannot trap a signal ignored on entry.
	defaultSignals()
	argv := append([]string{spec.Program}, spec.Args...)
	err = syscall.Exec(spec.Program, argv, spec.Env)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return fail(engine.CodeProgramNotFound, "%s: %v", spec.Program, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.ENOEXEC), errors.Is(err, unix.EPERM),
		errors.Is(err, unix.EISDIR), errors.Is(err, unix.ETXTBSY), errors.Is(err, unix.ELIBBAD):
		return fail(engine.CodeProgramNotExec, "%s: %v", spec.Program, err)
	}
	return fail(engine.CodeBoxSetupFailed, "exec %s: %v", spec.Program, err)
}

// dropCapabilities empties the bounding, ambient, effective, permitted and inheritable sets and
// locks the securebits, so that not even a uid 0 program (agentbox run by root) regains any.
func dropCapabilities() error {
	// SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_NO_CAP_AMBIENT_RAISE, each locked, and
	// SECBIT_KEEP_CAPS locked off (linux/securebits.h).
	const (
		noRoot, noRootLocked                 = 1 << 0, 1 << 1
		noSetuidFixup, noSetuidFixupLocked   = 1 << 2, 1 << 3
		keepCapsLocked                       = 1 << 5
		noAmbientRaise, noAmbientRaiseLocked = 1 << 6, 1 << 7
		secbits                              = noRoot | noRootLocked | noSetuidFixup | noSetuidFixupLocked | keepCapsLocked | noAmbientRaise | noAmbientRaiseLocked
	)
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secbits, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the last capability the kernel knows
			}
			return fmt.Errorf("bounding set: drop %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("ambient set: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// Landlock rights granted by the spec's lists.
const (
	llRead      = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	llReadWrite = llRead | ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
		ll.AccessFSMakeSym | ll.AccessFSRefer | ll.AccessFSTruncate
	llDev    = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSReadDir | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	llROFile = ll.AccessFSReadFile
	llRWFile = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	// llFileRights are the rights a rule on a non-directory may carry.
	llFileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	// llMaxABI is the newest ABI whose rights this engine handles: ABI 9's pathname unix socket
	// right would block connect() to the relay sockets without rules this engine does not write.
	llMaxABI = 7
)

// landlockConfigs are go-landlock's configs by ABI.
var landlockConfigs = []landlock.Config{landlock.V1, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7}

// landlockRuleset builds (without enforcing) the program's ruleset. It fails closed: a kernel
// without Landlock, or below the spec's minimum ABI, is an error, never a silent downgrade.
func landlockRuleset(l Landlock) (int, uint32, error) {
	abi, err := ll.LandlockGetABIVersion()
	if err != nil {
		return -1, 0, fmt.Errorf("not available (%v); agentbox needs Landlock ABI %d or newer (enable CONFIG_SECURITY_LANDLOCK and lsm=landlock)", err, l.MinABI)
	}
	if abi < l.MinABI {
		return -1, 0, fmt.Errorf("kernel has ABI %d, agentbox needs %d or newer", abi, l.MinABI)
	}
	use := min(abi, llMaxABI)
	base := landlockConfigs[use]
	// No network rights: the network namespace is the network boundary, and Landlock's port
	// rules would match every address.
	cfg := landlock.Config{HandledAccessFS: base.HandledAccessFS, Scoped: base.Scoped}
	handled := uint64(cfg.HandledAccessFS)

	var rules []landlock.Rule
	addRules := func(paths []string, rights uint64) error {
		for _, p := range paths {
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // not in this box (an optional mount that was skipped)
				}
				return fmt.Errorf("stat %s: %w", p, err)
			}
			r := rights & handled
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				r &= llFileRights
			}
			if r != 0 {
				rules = append(rules, landlock.PathAccess(landlock.AccessFSSet(r), p))
			}
		}
		return nil
	}
	for _, g := range []struct {
		paths  []string
		rights uint64
	}{
		// Listing directories reveals only names of what the mounts already show.
		{[]string{"/"}, ll.AccessFSReadDir},
		{l.RO, llRead},
		{l.RW, llReadWrite},
		{l.Dev, llDev},
		{l.ROFile, llROFile},
		{l.RWFile, llRWFile},
	} {
		if err := addRules(g.paths, g.rights); err != nil {
			return -1, 0, err
		}
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return -1, 0, err
	}
	if fd < 0 {
		return -1, 0, errors.New("no ruleset created")
	}
	return fd, flags, nil
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
