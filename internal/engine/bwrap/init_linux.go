package bwrap

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/engine/execstage"
	"github.com/agentbox/agentbox/internal/engine/forward"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/linux/fds"
	"github.com/agentbox/agentbox/internal/linux/mount"
)

// exitSetupFailed is bwrap-init's exit code when the box could not be finished or the program
// not exec'd; the shim learns why from the EventError before it.
const exitSetupFailed = execstage.ExitSetupFailed

// InitMain is the entry point of `agentbox bwrap-init`, PID 1 of a bwrap box (bwrap --as-pid-1),
// with the control socket at fd 3 and the spec at fd 4. It starts the program (execstage.Run), reports on the control socket, forwards signals, reaps, and exits
// with the program's status, as the native engine's box-init does.
func InitMain(args []string) int {
	fs := flag.NewFlagSet("bwrap-init", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rows := fs.Uint("rows", 0, "initial PTY rows")
	cols := fs.Uint("cols", 0, "initial PTY columns")
	protectFD := fs.Int("protect-fd", 0, "first descriptor of what keeping the protected paths needs of the host (protectFiles)")
	protectN := fs.Int("protect-n", 0, "how many descriptors follow -protect-fd")
	unshared := fs.Bool("unshared", false, "re-executed in a mount namespace of its own (ownMounts)")
	parseErr := fs.Parse(args)
	if parseErr == nil && *protectFD > 0 && !*unshared {
		// Before it reports: the namespaces the shim records are the box's final ones. A
		// failure here goes to bwrap's captured stderr, which the monitor reports.
		err := ownMounts(args)
		fmt.Fprintf(os.Stderr, "agentbox bwrap-init: keep the protected paths: %v\n", err)
		return exitSetupFailed
	}
	// Take the program's stderr back from bwrap's captured one, then tell the monitor that from
	// here on this process reports on the control channel.
	if err := unix.Dup3(fdStderr, 2, 0); err != nil {
		return exitSetupFailed
	}
	if _, err := unix.Write(fdReady, []byte{'R'}); err != nil {
		return exitSetupFailed
	}
	for _, fd := range []int{fdStderr, fdExe, fdStatus, fdReady} {
		unix.Close(fd)
	}
	// What the monitor opened on the host for keeping the protected paths is kept (close-on-exec).
	var protect []int
	for i := 0; parseErr == nil && i < *protectN; i++ {
		fd, err := unix.FcntlInt(uintptr(*protectFD+i), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			parseErr = fmt.Errorf("descriptor %d of the protected paths: %w", *protectFD+i, err)
			break
		}
		protect = append(protect, fd)
	}
	ctl, fail, ok := execstage.Control(fdControl, fdSpec, "bwrap-init")
	if !ok {
		return exitSetupFailed
	}
	if parseErr != nil {
		return fail("bwrap-init arguments: %v", parseErr)
	}
	ex, err := execstage.Start()
	if err != nil {
		return fail("%v", err)
	}
	raw, err := fds.ReadSpec(fdSpec)
	if err != nil {
		return fail("%v", err)
	}
	s, err := spec.Parse(raw)
	if err != nil {
		return fail("%v", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("set non-dumpable: %v", err)
	}
	unix.Umask(0o022)
	if err := hideProcessesInProc(s); err != nil {
		return fail("%v", err)
	}
	if err := capTmpfsInodes(s); err != nil {
		return fail("%v", err)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, execstage.ForwardedSignals()...)

	if err := forward.Start(s.Network.Forwards); err != nil {
		return fail("%v", err)
	}
	var started func(int)
	if *unshared {
		prot, err := protectMounts(s, protect)
		if err != nil {
			return fail("%v", err)
		}
		defer prot.Close()
		started = prot.Started
	}
	return execstage.Run(execstage.Options{
		Control: ctl, Exec: ex, Raw: raw, Spec: s, Rows: uint16(*rows), Cols: uint16(*cols),
		Signals: sigs, Who: "bwrap-init", Started: started, Fail: fail,
	})
}

// ownMounts re-executes bwrap-init (with -unshared) in a mount namespace of its own, on this
// thread (a mount namespace is a thread's, and execve keeps the calling thread's): bwrap-init
// runs in a user namespace of its own beneath the one that owns bwrap's mount namespace (an
// unprivileged bwrap makes a second one), where it may not mount; in a mount namespace it owns
// it may, over bwrap's mounts, which it cannot undo there (they are locked). It returns only on
// failure.
func ownMounts(args []string) error {
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	exe := "/proc/self/fd/" + strconv.Itoa(fdExe)
	argv := append([]string{exe, "bwrap-init"}, args...)
	return unix.Exec(exe, append(argv, "-unshared"), os.Environ())
}

// protectMounts keeps the box's protected paths for its life, as the native engine's box-init
// does (mount.Protect): it takes over the workspace's binds and the masks bwrap made, puts each
// staged copy on a tmpfs bounded at changes.MaxFile over bwrap's bind of the host's copy, and
// guards the workspace's absent protected paths (and those the host removes while the box
// runs) into the proposed changes' store. fds are what the monitor opened on the host
// (protectFiles): the store when the spec has one, then each staged copy and its folder.
func protectMounts(s *spec.Spec, fds []int) (*mount.Protection, error) {
	var guard *changes.Guard
	if s.ChangesDir != "" {
		if len(fds) == 0 {
			return nil, errors.New("the proposed changes' store was not passed")
		}
		// The store is the monitor's descriptor, reached through this process's own fd table.
		g, err := changes.Open("/proc/self/fd/"+strconv.Itoa(fds[0])+"/.", s.Guards, true)
		unix.Close(fds[0])
		fds = fds[1:]
		if err != nil {
			return nil, err
		}
		guard = g
	}
	var staged []mount.StagedFile
	for ; len(fds) >= 2; fds = fds[2:] {
		staged = append(staged, mount.StagedFile{File: os.NewFile(uintptr(fds[0]), "staged copy"), Dir: fds[1]})
	}
	if len(fds) != 0 {
		return nil, errors.New("a staged copy's folder was not passed")
	}
	root, err := mount.Adopt(s, staged)
	if err != nil {
		return nil, err
	}
	return mount.Protect(root, guard, "bwrap-init")
}

// hideProcessesInProc reconfigures the box's /proc (bwrap's --proc takes no options) with
// hidepid=ptraceable, as the native engine mounts it: processes the program may not ptrace —
// bwrap-init, which is not dumpable — are invisible in it, so that even a root-run box (whose
// uid 0 owns bwrap-init's entries) cannot list PID 1's descriptors; the conformance test
// InitHiddenInProc checks that an ordinary user's box hides it without. Only the superblock's
// options change (fspick, fsconfig), not the mount's flags or the masks over it.
func hideProcessesInProc(s *spec.Spec) error {
	target := ""
	for _, m := range s.Mounts {
		if m.Kind == spec.KindProc {
			target = m.Target
		}
	}
	if target == "" || s.UID != 0 {
		// Only a root-run box needs it: otherwise bwrap-init's entries (not dumpable) belong to
		// the box's root, not to the program's uid, and an unprivileged bwrap leaves bwrap-init
		// in a nested user namespace that cannot reconfigure the box's /proc anyway.
		return nil
	}
	fd, err := unix.Fspick(unix.AT_FDCWD, target, unix.FSPICK_CLOEXEC|unix.FSPICK_NO_AUTOMOUNT|unix.FSPICK_SYMLINK_NOFOLLOW)
	if err != nil {
		return fmt.Errorf("hide processes in %s: fspick: %w", target, err)
	}
	defer unix.Close(fd)
	if err := unix.FsconfigSetString(fd, "hidepid", "ptraceable"); err != nil {
		return fmt.Errorf("hide processes in %s: hidepid: %w", target, err)
	}
	if err := unix.FsconfigReconfigure(fd); err != nil {
		return fmt.Errorf("hide processes in %s: reconfigure: %w", target, err)
	}
	return nil
}

// capTmpfsInodes gives each tmpfs of the box the inode bound (nr_inodes) its spec names, which
// bwrap cannot (0.8 takes --size and --perms only): each superblock is reconfigured (fspick,
// fsconfig), as hideProcessesInProc does. bwrap-init may: in a root-run box it is root, in an
// ordinary user's box run by bwrap 0.5 or later it holds its capabilities in the user
// namespace the monitor made and bwrap joined (--userns), which owns bwrap's tmpfs mounts. Only
// under an older bwrap, which nests the box in a user namespace of its own, is the
// reconfiguration refused (EPERM): then an ordinary user's box keeps the kernel's default,
// said on the box's standard error (docs/security.md); a root-run box's launch fails.
func capTmpfsInodes(s *spec.Spec) error {
	err := capTmpfsInodesAll(s)
	if err != nil && s.UID != 0 && errors.Is(err, unix.EPERM) {
		fmt.Fprintf(os.Stderr, "agentbox: warning: the box's tmpfs inode bounds are not applied (%v): bubblewrap older than 0.5 nests the box in a user namespace of its own; install bubblewrap 0.5 or later\n", err)
		return nil
	}
	return err
}

func capTmpfsInodesAll(s *spec.Spec) error {
	for _, m := range s.Mounts {
		n, ok := tmpfsOption(m.Options, "nr_inodes")
		if m.Kind != spec.KindTmpfs || m.Target == "/dev" || !ok {
			continue
		}
		fd, err := unix.Fspick(unix.AT_FDCWD, m.Target, unix.FSPICK_CLOEXEC|unix.FSPICK_NO_AUTOMOUNT|unix.FSPICK_SYMLINK_NOFOLLOW)
		if err != nil {
			return fmt.Errorf("bound the inodes of %s: fspick: %w", m.Target, err)
		}
		err = unix.FsconfigSetString(fd, "nr_inodes", n)
		if err == nil {
			err = unix.FsconfigReconfigure(fd)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("bound the inodes of %s to %s: %w", m.Target, n, err)
		}
	}
	return nil
}
