package native

import (
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/execstage"
	"github.com/agentbox/agentbox/internal/engine/forward"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/linux/fds"
	"github.com/agentbox/agentbox/internal/linux/mount"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/warmup"
)

// exitSetupFailed is box-init's exit code when the box could not be built or the program not
// exec'd; the shim learns the reason from the EventError before it.
const exitSetupFailed = execstage.ExitSetupFailed

// launchMarker is the signal a prestarted box-init sends itself when it gets its launch
// (afterMarker). A real-time signal: its number is above every forwarded signal's, and Go hands
// the signals that are pending together to a channel in the order of their numbers.
const launchMarker = syscall.Signal(40)

// afterMarker sends launchMarker to this process, whose notified channel is subscribed to it,
// and returns a channel of what notified receives after it: the signals that reached this
// process before are dropped. Should the marker not be sent, nothing is dropped.
func afterMarker(notified chan os.Signal) <-chan os.Signal {
	if err := unix.Kill(os.Getpid(), launchMarker); err != nil {
		return notified
	}
	out := make(chan os.Signal, cap(notified))
	go func() {
		for s := range notified {
			if s == launchMarker {
				break
			}
		}
		for s := range notified {
			if s != launchMarker {
				out <- s
			}
		}
	}()
	return out
}

// BoxInitMain is the entry point of `agentbox box-init`: PID 1 of the box, started by
// Engine.Start in the box's new namespaces with the control socket at fd 3 and the spec at fd
// 4. It starts box-exec, builds the box, hands box-exec the program, reports on the control socket, forwards signals,
// reaps, and exits with the program's status (128+n for a signal).
func BoxInitMain(args []string) int {
	ctl, fail, ok := execstage.Control(fdControl, fdSpec, "box-init")
	if !ok {
		return exitSetupFailed
	}

	fs := flag.NewFlagSet("box-init", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rows := fs.Uint("rows", 0, "initial PTY rows")
	cols := fs.Uint("cols", 0, "initial PTY columns")
	wait := fs.Bool("wait", false, "started ahead (Prestart): wait for the request on the control socket")
	hold := fs.Bool("hold", false, "build the box, then wait for EventGo before starting the program")
	loopback := fs.Bool("loopback", false, "with -wait: bring lo up while waiting (the box has its own network namespace)")
	if err := fs.Parse(args); err != nil {
		return fail("box-init arguments: %v", err)
	}
	// Signals that arrive before the program runs are held and forwarded once it does. They
	// are subscribed to first: each costs a round trip to the runtime's signal thread, which a
	// prestarted box-init pays while it waits.
	var sigs <-chan os.Signal
	notified := make(chan os.Signal, 16)
	signal.Notify(notified, execstage.ForwardedSignals()...)
	if *wait {
		signal.Notify(notified, launchMarker) // for afterMarker, subscribed while it waits
	}
	sigs = notified
	// box-exec starts now, so that its start-up overlaps building the box (and, in a prestarted
	// box-init, waiting for the request).
	ex, err := execstage.Start()
	if err != nil {
		return fail("%v", err)
	}
	var raw []byte
	loUp := false
	if *wait {
		warmup.Do(&spec.Spec{}) // started ahead: what the launch would do first, done while it waits
		if *loopback {
			if err := ns.LoopbackUp(); err != nil {
				return fail("bring lo up: %v", err)
			}
			loUp = true
		}
		var r, c uint16
		if raw, r, c, *hold, err = receiveStart(ctl); errors.Is(err, engine.ErrControlClosed) {
			return exitSetupFailed // discarded unused
		}
		*rows, *cols = uint(r), uint(c)
		// What reached this box-init before it had a launch is no launch's signal. Go hands a
		// signal to the channel a moment after the kernel delivered it, so what is in the channel
		// now is not all of it: box-init sends itself a marker, and what comes before the marker
		// is dropped (off the launch's path: the program runs well after the marker is back).
		sigs = afterMarker(notified)
	} else {
		raw, err = fds.ReadSpec(fdSpec)
	}
	if err != nil {
		return fail("%v", err)
	}
	s, err := spec.Parse(raw)
	if err != nil {
		return fail("%v", err)
	}
	if loUp && !s.Network.Loopback {
		// Prestarted in its own network namespace for a spec that shares the host's: the
		// shim matches namespaces before it uses a prestarted box-init, so this never happens.
		return fail("prestarted with its own network namespace, for a spec without one")
	}
	// box-exec parses the spec and builds the program's seccomp filter while the box is built.
	// (Should box-exec have failed, its report is read when the program is to start: run.)
	_ = ex.SendSpec(raw)
	// Nothing in the box may read box-init's memory or descriptors.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("set non-dumpable: %v", err)
	}
	unix.Umask(0o022)

	// The workspace's absent protected paths are guarded (what the box creates there is moved
	// into the launch's proposed changes); the store is a host folder, opened before the root is
	// built.
	// The protected paths that exist are guarded too should the host remove them while the box
	// runs (mount.Keeper.Guard): the store is opened whenever the launch has one.
	var guard *changes.Guard
	if len(s.Guards) > 0 || s.ChangesDir != "" {
		if guard, err = changes.Open(s.ChangesDir, s.Guards, true); err != nil {
			return fail("%v", err)
		}
	}

	root, err := mount.Build(s)
	if err != nil {
		return fail("%v", err)
	}
	if s.HasNamespace("uts") && s.Hostname != "" {
		if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
			return fail("sethostname: %v", err)
		}
	}
	if s.Network.Loopback && !loUp {
		if err := ns.LoopbackUp(); err != nil {
			return fail("bring lo up: %v", err)
		}
	}
	if err := root.Pivot(); err != nil {
		return fail("%v", err)
	}
	if err := forward.Start(s.Network.Forwards); err != nil {
		return fail("%v", err)
	}
	if *hold {
		// box-exec builds the program's Landlock ruleset while the box waits for its client (a
		// failure of box-exec is read when the program is to start, as above).
		_ = ex.Built(raw)
		r, c, err := awaitGo(ctl)
		if errors.Is(err, engine.ErrControlClosed) {
			return exitSetupFailed // the shim gave up on the launch before its program started
		}
		if err != nil {
			return fail("%v", err)
		}
		*rows, *cols = uint(r), uint(c)
	}

	// The protected paths are kept from before the program starts (mount.Protect): the masks'
	// and binds' folders are watched, the staged copies followed, the guarded paths' folders
	// watched; a box whose paths cannot be watched does not start.
	prot, err := mount.Protect(root, guard, "box-init")
	if err != nil {
		return fail("%v", err)
	}
	// The protection's inotify instances are closed last, when the launch may have ended
	// already (below): their release waits for the kernel, several milliseconds, unless the
	// shim holds them then (handed over with the end).
	defer prot.Close()
	return execstage.Run(execstage.Options{
		Control: ctl, Exec: ex, Raw: raw, Spec: s, Rows: uint16(*rows), Cols: uint16(*cols),
		Signals: sigs, Who: "box-init", Started: prot.Started, Fail: fail,
		Exited: func(code int) {
			// Once every other process of the box is gone and the protection's last passes
			// are done, nothing of the box runs: the shim hears of the end now, with
			// box-init's inotify instances, which it closes while the launch settles and
			// box-init exits.
			if prot.Finish() {
				execstage.ReportEnded(ctl, code, prot.Instances()...)
			}
		},
	})
}
