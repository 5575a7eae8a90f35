package bwrap

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/execstage"
	"github.com/agentbox/agentbox/internal/engine/forward"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/linux/fds"
)

// exitSetupFailed is bwrap-init's exit code when the box could not be finished or the program
// not exec'd; the shim learns why from the EventError before it.
const exitSetupFailed = 1

// InitMain is the entry point of `agentbox bwrap-init`, PID 1 of a bwrap box (bwrap --as-pid-1),
// with the control socket at fd 3 and the spec at fd 4. It starts the program (execstage.Run), reports on the control socket, forwards signals, reaps, and exits
// with the program's status, as the native engine's box-init does.
func InitMain(args []string) int {
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
	if err := fds.CloseInherited(fdSpec + 1); err != nil {
		return exitSetupFailed
	}
	if err := unix.CloseRange(fdControl, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return exitSetupFailed
	}
	ctl := os.NewFile(fdControl, "control")
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if err := engine.SendEvent(ctl, engine.Event{Kind: engine.EventError, Code: engine.CodeBoxSetupFailed, Message: msg}); err != nil {
			fmt.Fprintf(os.Stderr, "agentbox bwrap-init: %s (and reporting it failed: %v)\n", msg, err)
		}
		return exitSetupFailed
	}
	fs := flag.NewFlagSet("bwrap-init", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rows := fs.Uint("rows", 0, "initial PTY rows")
	cols := fs.Uint("cols", 0, "initial PTY columns")
	if err := fs.Parse(args); err != nil {
		return fail("bwrap-init arguments: %v", err)
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
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, execstage.ForwardedSignals()...)

	if err := forward.Start(s.Network.Forwards); err != nil {
		return fail("%v", err)
	}

	return execstage.Run(execstage.Options{
		Control: ctl, Exec: ex, Raw: raw, Spec: s, Rows: uint16(*rows), Cols: uint16(*cols),
		Signals: sigs, Who: "bwrap-init", Fail: fail,
	})
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
