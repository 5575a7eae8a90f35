// Package execstage is the start and the end of every Linux engine's in-box init (the native
// engine's box-init, the bwrap engine's bwrap-init) and box-exec, the process that becomes the
// program. The init sets its descriptors and its report of a set-up failure first (Control),
// starts box-exec early (Start), hands it the spec as soon as it has it and the news
// that the box is built, and at the end (Run) the program's console — a PTY of the box's own
// devpts, whose master goes to the shim, or the inherited stdio; box-exec drops every
// capability, sets no_new_privs, applies Landlock and seccomp and execs the program. Run then
// reports the exec (or the typed failure) on the control channel, forwards signals and reaps.
// Binaries that embed an engine must dispatch argv[1] "box-exec" to Main (internal/boxmain).
package execstage

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/linux/fds"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/linux/pty"
	"github.com/agentbox/agentbox/internal/plan"
)

// ExitSetupFailed is an init's exit code when the box could not be built or the program not
// exec'd; the shim learns the reason from the EventError before it.
const ExitSetupFailed = 1

// fdExec is box-exec's end of the exec socket.
const fdExec = 3

// forwardedSignals are passed from the init to the program's process group.
var forwardedSignals = []os.Signal{
	unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH,
}

// ForwardedSignals are the signals an init passes on to the program's process group (Run
// forwards what its Signals channel receives; subscribe it to these).
func ForwardedSignals() []os.Signal { return append([]os.Signal(nil), forwardedSignals...) }

// Control is the first step of both inits (box-init; bwrap-init once it has taken back its own
// descriptors): it closes every descriptor above last that this process inherited (any the
// shim leaked, that it did not mean to pass), makes those from control up, which the init
// keeps, close-on-exec, so that the program gets only what it is given, and returns the
// control socket at control and the init's report of a set-up failure (Options.Fail): fail
// sends the message on ctl as an EventError with engine.CodeBoxSetupFailed, writes it to
// stderr as who's should that fail, and returns ExitSetupFailed. ok is false when the
// descriptors could not be set: there is then nowhere to report it.
func Control(control, last int, who string) (ctl *os.File, fail func(format string, a ...any) int, ok bool) {
	if err := fds.CloseInherited(last + 1); err != nil {
		return nil, nil, false
	}
	if err := unix.CloseRange(uint(control), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return nil, nil, false
	}
	ctl = os.NewFile(uintptr(control), "control")
	fail = func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if err := engine.SendEvent(ctl, engine.Event{Kind: engine.EventError, Code: engine.CodeBoxSetupFailed, Message: msg}); err != nil {
			fmt.Fprintf(os.Stderr, "agentbox %s: %s (and reporting it failed: %v)\n", who, msg, err)
		}
		return ExitSetupFailed
	}
	return ctl, fail, true
}

// Options are what Run needs from the init that calls it.
type Options struct {
	// Control is the init's end of the box's control socket (events go to the shim on it).
	Control *os.File
	// Exec is the box-exec the init started early (Start).
	Exec *Process
	// Raw is the spec's bytes, Spec the same parsed (spec.Parse).
	Raw  []byte
	Spec *spec.Spec
	// Rows and Cols size the PTY in tty mode; zero leaves it 0×0 until the shim resizes it.
	Rows, Cols uint16
	// Signals are forwarded to the program's process group once it runs (those that arrive
	// before are held in the channel until then).
	Signals <-chan os.Signal
	// Who names the init in messages ("box-init", "bwrap-init").
	Who string
	// Started, when not nil, runs once the program runs, with its pid.
	Started func(pid int)
	// Exited, when not nil, runs once the program has exited, with its exit code (128+n for
	// a signal), before Run returns it; the PTY's slave is closed by then. An init that can
	// tell the box has ended before its own exit reports it there (ReportEnded).
	Exited func(code int)
	// Fail reports a set-up failure on Control and returns the exit code.
	Fail func(format string, a ...any) int
}

// Run is the end of every engine's init (PID 1 of the box): it hands box-exec (o.Exec) the spec
// and the program's console — a PTY of the box's own devpts, whose master goes to the shim, or
// the inherited stdio — learns whether the program was exec'd, reports EventExec or the typed
// EventError on o.Control, forwards o.Signals to the program's process group, and reaps until
// the program exits, returning its status as an exit code.
func Run(o Options) int {
	stdio := [3]int{0, 1, 2}
	var slave *os.File
	if o.Spec.Console == plan.ConsoleTTY {
		var err error
		if slave, err = openPTY(o.Control, o.Rows, o.Cols); err != nil {
			return o.Fail("%v", err)
		}
		defer slave.Close()
		fd := int(slave.Fd())
		stdio = [3]int{fd, fd, fd}
	}
	pid := o.Exec.pid
	if failure := o.Exec.handOver(o.Raw, stdio); failure != nil {
		reapUntil(pid)
		ev := failure.event()
		if err := engine.SendEvent(o.Control, ev); err != nil {
			fmt.Fprintf(os.Stderr, "agentbox %s: %s (and reporting it failed: %v)\n", o.Who, ev.Message, err)
		}
		return ExitSetupFailed
	}
	if err := engine.SendEvent(o.Control, engine.Event{Kind: engine.EventExec, Pid: pid}); err != nil {
		// The shim is gone or broken: the box must not run unsupervised.
		unix.Kill(-pid, unix.SIGKILL)
		return ExitSetupFailed
	}
	go func() {
		for s := range o.Signals {
			unix.Kill(-pid, s.(syscall.Signal))
		}
	}()
	if o.Started != nil {
		o.Started(pid)
	}
	code := reapUntil(pid)
	if o.Exited != nil {
		if slave != nil {
			slave.Close() // the shim's read of the PTY ends once the box's processes are gone
		}
		o.Exited(code)
	}
	return code
}

// ReportEnded tells the shim on ctl that the box has ended with the program's exit code
// (EventEnded), for an init (PID 1 of the box's pid namespace) that has killed every other
// process of the box and has finished what it does with the box's files. It looks itself
// whether a process other than the init is left (a zombie runs nothing), and sends nothing
// then. Otherwise its stdin, stdout and stderr, the box's output streams, are replaced by
// /dev/null first, so that the shim reads the output to its end now; then the event is sent
// and ctl closed. Should the streams not be replaced, nothing is sent either: the init's
// exit ends the launch then, as it does for an init that does not report. held are
// descriptors the init hands the shim with the report (its inotify instances, whose release
// waits for the kernel: the shim closes them while the launch ends and the init exits).
func ReportEnded(ctl *os.File, code int, held ...int) {
	if ns.OthersLeft() {
		return
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(null)
	for fd := 0; fd <= 2; fd++ {
		if err := unix.Dup3(null, fd, 0); err != nil {
			return
		}
	}
	if err := engine.SendEvent(ctl, engine.Event{Kind: engine.EventEnded, Exit: code}, held...); err != nil {
		return
	}
	ctl.Close()
}

// reapUntil reaps every child (PID 1 inherits the box's orphans) until pid exits, and returns
// its status as an exit code: the code, or 128+n when a signal killed it.
func reapUntil(pid int) int {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return ExitSetupFailed // ECHILD: nothing left to wait for
		}
		if got != pid {
			continue
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
}

// openPTY allocates a PTY in the box's devpts, sends the master to the shim and returns the
// slave.
func openPTY(ctl *os.File, rows, cols uint16) (*os.File, error) {
	master, slave, err := pty.Open(rows, cols)
	if err != nil {
		return nil, err
	}
	defer unix.Close(master)
	if err := engine.SendEvent(ctl, engine.Event{Kind: engine.EventPTY}, master); err != nil {
		unix.Close(slave)
		return nil, err
	}
	return os.NewFile(uintptr(slave), "pty"), nil
}
