package native

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
)

// execFailure is what box-exec writes on the exec marker pipe when it cannot exec the program.
type execFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// BoxExecMain is the entry point of `agentbox box-exec`, started by box-init inside the box: it
// drops every capability, sets no_new_privs, applies Landlock and seccomp to its own thread and
// execs the program with the spec's environment. On failure it reports on the exec marker (fd
// 3) and exits 1; on success the marker closes (close-on-exec) and the program runs.
func BoxExecMain(args []string) int {
	// Capabilities, no_new_privs, Landlock and seccomp are per thread: all of it must happen on
	// the thread that calls execve.
	runtime.LockOSThread()
	if _, err := unix.FcntlInt(fdMarker, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return 1 // no marker: box-init reports the missing exec as a setup failure
	}
	fail := func(code string, format string, a ...any) int {
		b, _ := json.Marshal(execFailure{Code: code, Message: fmt.Sprintf(format, a...)})
		unix.Write(fdMarker, b)
		return 1
	}
	raw, err := readSpecFD(fdSpec)
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "box-exec: %v", err)
	}
	unix.Close(fdSpec)
	spec, err := ParseSpec(raw)
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "box-exec: %v", err)
	}
	// Nothing but stdio reaches the program.
	if err := unix.CloseRange(fdMarker+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail(engine.CodeBoxSetupFailed, "close descriptors: %v", err)
	}
	if err := unix.Chdir(spec.Cwd); err != nil {
		return fail(engine.CodeBoxSetupFailed, "chdir %s: %v", spec.Cwd, err)
	}
	ruleset, rulesetFlags, err := landlockRuleset(spec.Landlock)
	if err != nil {
		return fail(engine.CodeBoxSetupFailed, "landlock: %v", err)
	}
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
	unix.Close(ruleset)
	if err := loadSeccomp(filter); err != nil {
		return fail(engine.CodeBoxSetupFailed, "seccomp: %v", err)
	}
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
