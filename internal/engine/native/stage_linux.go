package native

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/plan"
)

// RunExecStage is the end of every engine's init (PID 1 of the box): it hands box-exec (ex,
// started early by StartExecProcess) the spec raw and the program's console — a PTY of the
// box's own devpts, whose master goes to the shim, or the inherited stdio — learns whether the
// program was exec'd, reports EventExec or the typed EventError on ctl, forwards sigs to the
// program's process group, and reaps until the program exits, returning its status. who names
// the caller in messages; started, when not nil, runs once the program runs; fail reports a
// setup failure and returns the exit code.
func RunExecStage(ctl *os.File, ex *ExecProcess, raw []byte, spec *Spec, rows, cols uint16, sigs <-chan os.Signal, who string,
	started func(pid int), fail func(format string, a ...any) int) int {
	return runExecStage(ctl, ex, raw, spec, rows, cols, sigs, who, started, fail)
}

func runExecStage(ctl *os.File, ex *execProcess, raw []byte, spec *Spec, rows, cols uint16, sigs <-chan os.Signal, who string,
	started func(pid int), fail func(format string, a ...any) int) int {
	stdio := [3]int{0, 1, 2}
	if spec.Console == plan.ConsoleTTY {
		slave, err := openPTY(ctl, rows, cols)
		if err != nil {
			return fail("%v", err)
		}
		defer slave.Close()
		fd := int(slave.Fd())
		stdio = [3]int{fd, fd, fd}
	}
	pid := ex.pid
	if failure := ex.run(raw, stdio); failure != nil {
		reapUntil(pid)
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
