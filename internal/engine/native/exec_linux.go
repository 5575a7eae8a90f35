package native

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
)

// execFailure is why the program could not be started: a typed code and a message.
type execFailure struct {
	Code    string
	Message string
}

func (f *execFailure) event() engine.Event {
	return engine.Event{Kind: engine.EventError, Code: f.Code, Message: f.Message}
}

// startRestricted starts the program of spec with the given stdio and process attributes from
// a dedicated OS thread that first takes on every restriction the program must run under:
// its own working directory (unshare CLONE_FS, chdir), every capability dropped, no_new_privs,
// Landlock and seccomp. All of these are per thread and inherited across fork and execve, so
// the program starts under them while the rest of the calling process (PID 1 of the box) keeps
// its own. The thread is locked and never unlocked: it exits with its goroutine, restrictions
// and all, and the Go runtime never clones new threads from a locked one. It returns the
// program's pid once its execve succeeded (syscall.ForkExec waits for that), or why it failed.
func startRestricted(spec *Spec, files []uintptr, sys *syscall.SysProcAttr) (int, *execFailure) {
	type result struct {
		pid  int
		fail *execFailure
	}
	var restrict func(out chan<- result)
	restrict = func(out chan<- result) {
		runtime.LockOSThread() // deliberately never unlocked once restricted
		if unix.Gettid() == unix.Getpid() {
			// This is the main thread, the thread group leader: signals and /proc address the
			// process through it, so it must keep the process's own credentials (restricted,
			// it would share the program's Landlock domain, and the program could signal its
			// PID 1). Hold it, so that the next goroutine runs on another thread, and restrict
			// that one.
			inner := make(chan result, 1)
			go restrict(inner)
			r := <-inner
			runtime.UnlockOSThread()
			out <- r
			return
		}
		pid, fail := restrictThreadAndStart(spec, files, sys)
		out <- result{pid, fail}
	}
	done := make(chan result, 1)
	go restrict(done)
	r := <-done
	return r.pid, r.fail
}

func restrictThreadAndStart(spec *Spec, files []uintptr, sys *syscall.SysProcAttr) (int, *execFailure) {
	fail := func(code string, format string, a ...any) (int, *execFailure) {
		return 0, &execFailure{Code: code, Message: fmt.Sprintf(format, a...)}
	}
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fail(engine.CodeBoxSetupFailed, "unshare fs: %v", err)
	}
	if err := unix.Chdir(spec.Cwd); err != nil {
		return fail(engine.CodeBoxSetupFailed, "chdir %s: %v", spec.Cwd, err)
	}
	ruleset, rulesetFlags, err := landlockRuleset(spec.Landlock)
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "landlock: %v", err)
	}
	defer unix.Close(ruleset)
	filter, err := seccompProgram(spec.Seccomp)
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "seccomp: %v", err)
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
	if err := loadSeccomp(filter, 0); err != nil {
		return fail(engine.CodeBoxSetupFailed, "seccomp: %v", err)
	}
	argv := append([]string{spec.Program}, spec.Args...)
	pid, err := syscall.ForkExec(spec.Program, argv, &syscall.ProcAttr{Env: spec.Env, Files: files, Sys: sys})
	switch {
	case err == nil:
		return pid, nil
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
