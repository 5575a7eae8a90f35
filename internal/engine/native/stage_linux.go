package native

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/plan"
)

// RunExecStage is the end of every engine's init (PID 1 of the box): it starts box-exec on the
// console (a PTY of the box's own devpts, whose master goes to the shim, or the inherited
// stdio), learns through the exec marker whether the program was exec'd, reports EventExec or
// the typed EventError on ctl, forwards sigs to the program's process group, and reaps until
// the program exits, returning its status. who names the caller in messages; started, when not
// nil, runs once the program runs; fail reports a setup failure and returns the exit code.
// box-exec inherits the spec memfd at fdSpec.
func RunExecStage(ctl *os.File, console plan.Console, rows, cols uint16, sigs <-chan os.Signal, who string,
	started func(pid int), fail func(format string, a ...any) int) int {
	return runExecStage(ctl, console, rows, cols, sigs, who, started, fail)
}

func runExecStage(ctl *os.File, console plan.Console, rows, cols uint16, sigs <-chan os.Signal, who string,
	started func(pid int), fail func(format string, a ...any) int) int {
	stdio := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	sys := &syscall.SysProcAttr{Setpgid: true}
	if console == plan.ConsoleTTY {
		slave, err := openPTY(ctl, rows, cols)
		if err != nil {
			return fail("%v", err)
		}
		defer slave.Close()
		stdio = []*os.File{slave, slave, slave}
		sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}

	// The exec marker: box-exec holds the write end, close-on-exec. EOF without a byte means
	// the program's execve succeeded; otherwise box-exec wrote why it failed.
	markR, markW, err := os.Pipe()
	if err != nil {
		return fail("exec marker pipe: %v", err)
	}
	specFile := os.NewFile(fdSpec, "spec")
	proc, err := os.StartProcess("/proc/self/exe", []string{"agentbox", "box-exec"}, &os.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: append(stdio, markW, specFile),
		Sys:   sys,
	})
	markW.Close()
	specFile.Close()
	if err != nil {
		return fail("start box-exec: %v", err)
	}
	pid := proc.Pid
	proc.Release() // reaped below with wait4, as PID 1 reaps everything
	if console == plan.ConsoleTTY {
		stdio[0].Close()
	}
	report, _ := io.ReadAll(markR)
	markR.Close()
	if len(report) > 0 {
		ev := execFailureEvent(report)
		reapUntil(pid)
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
