package native

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/plan"
)

// RunExecStage is the end of every engine's init (PID 1 of the box): it starts the program of
// spec on the console (a PTY of the box's own devpts, whose master goes to the shim, or the
// inherited stdio) from a thread that has taken on the program's restrictions (see
// startRestricted), reports EventExec once the program's execve succeeded or the typed
// EventError when it did not, forwards sigs to the program's process group, and reaps until the
// program exits, returning its status. who names the caller in messages; started, when not nil,
// runs once the program runs; fail reports a setup failure and returns the exit code.
func RunExecStage(ctl *os.File, spec *Spec, rows, cols uint16, sigs <-chan os.Signal, who string,
	started func(pid int), fail func(format string, a ...any) int) int {
	return runExecStage(ctl, spec, rows, cols, sigs, who, started, fail)
}

func runExecStage(ctl *os.File, spec *Spec, rows, cols uint16, sigs <-chan os.Signal, who string,
	started func(pid int), fail func(format string, a ...any) int) int {
	stdio := []uintptr{0, 1, 2}
	sys := &syscall.SysProcAttr{Setpgid: true}
	if spec.Console == plan.ConsoleTTY {
		slave, err := openPTY(ctl, rows, cols)
		if err != nil {
			return fail("%v", err)
		}
		defer slave.Close()
		fd := slave.Fd()
		stdio = []uintptr{fd, fd, fd}
		sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	pid, failure := startRestricted(spec, stdio, sys)
	if failure != nil {
		ev := failure.event()
		if err := engine.SendEvent(ctl, ev); err != nil {
			fmt.Fprintf(os.Stderr, "agentbox %s: %s (and reporting it failed: %v)\n", who, ev.Message, err)
		}
		return exitSetupFailed
	}
	if err := engine.SendEvent(ctl, engine.Event{Kind: engine.EventExec, Pid: pid}); err != nil {
		// The shim is gone or broken: the box must not run unsupervised.
		unix.Kill(-pid, unix.SIGKILL)
		return exitSetupFailed
	}
	go func() {
		for s := range sigs {
			unix.Kill(-pid, s.(syscall.Signal))
		}
	}()
	if started != nil {
		started(pid)
	}
	return reapUntil(pid)
}
