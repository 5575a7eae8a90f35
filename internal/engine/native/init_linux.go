package native

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/engine"
)

// exitSetupFailed is box-init's exit code when the box could not be built or the program not
// exec'd; the shim learns the reason from the EventError before it.
const exitSetupFailed = 1

// forwardedSignals are passed from box-init to the program's process group.
var forwardedSignals = []os.Signal{
	unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH,
}

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
	// Descriptors the shim leaked to box-init (any it did not mean to pass) are closed; those
	// box-init keeps are close-on-exec, so that the program gets only what it is given.
	if err := closeInherited(fdSpec + 1); err != nil {
		return exitSetupFailed
	}
	if err := unix.CloseRange(fdControl, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return exitSetupFailed
	}
	ctl := os.NewFile(fdControl, "control")
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if err := engine.SendEvent(ctl, engine.Event{Kind: engine.EventError, Code: engine.CodeBoxSetupFailed, Message: msg}); err != nil {
			fmt.Fprintf(os.Stderr, "agentbox box-init: %s (and reporting it failed: %v)\n", msg, err)
		}
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
	signal.Notify(notified, forwardedSignals...)
	if *wait {
		signal.Notify(notified, launchMarker) // for afterMarker, subscribed while it waits
	}
	sigs = notified
	// box-exec starts now, so that its start-up overlaps building the box (and, in a prestarted
	// box-init, waiting for the request).
	ex, err := startExecProcess()
	if err != nil {
		return fail("%v", err)
	}
	var raw []byte
	loUp := false
	if *wait {
		WarmUp() // started ahead: what the launch would do first, done while it waits
		if *loopback {
			if err := loopbackUp(); err != nil {
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
		raw, err = readSpecFD(fdSpec)
	}
	if err != nil {
		return fail("%v", err)
	}
	spec, err := ParseSpec(raw)
	if err != nil {
		return fail("%v", err)
	}
	if loUp && !spec.Network.Loopback {
		// Prestarted in its own network namespace for a spec that shares the host's: the
		// shim matches namespaces before it uses a prestarted box-init, so this never happens.
		return fail("prestarted with its own network namespace, for a spec without one")
	}
	// box-exec parses the spec and builds the program's seccomp filter while the box is built.
	// (Should box-exec have failed, its report is read when the program is to start: run.)
	_ = ex.sendSpec(raw)
	// Nothing in the box may read box-init's memory or descriptors.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("set non-dumpable: %v", err)
	}
	unix.Umask(0o022)

	// The workspace's absent protected paths are guarded (what the box creates there is moved
	// into the launch's proposed changes); the store is a host folder, opened before the root is
	// built.
	var guard *changes.Guard
	if len(spec.Guards) > 0 {
		if guard, err = changes.Open(spec.ChangesDir, spec.Guards, true); err != nil {
			return fail("%v", err)
		}
	}

	b, err := buildRoot(spec)
	if err != nil {
		return fail("%v", err)
	}
	if spec.hasNamespace("uts") && spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fail("sethostname: %v", err)
		}
	}
	if spec.Network.Loopback && !loUp {
		if err := loopbackUp(); err != nil {
			return fail("bring lo up: %v", err)
		}
	}
	if err := b.pivot(); err != nil {
		return fail("%v", err)
	}
	if err := startForwards(spec.Network.Forwards); err != nil {
		return fail("%v", err)
	}
	if *hold {
		// box-exec builds the program's Landlock ruleset while the box waits for its client (a
		// failure of box-exec is read when the program is to start, as above).
		_ = ex.built(raw)
		r, c, err := awaitGo(ctl)
		if errors.Is(err, engine.ErrControlClosed) {
			return exitSetupFailed // the shim gave up on the launch before its program started
		}
		if err != nil {
			return fail("%v", err)
		}
		*rows, *cols = uint(r), uint(c)
	}

	// The masks' folders are watched from before the program starts (keepMounts); a box whose
	// denied paths cannot be watched does not start.
	gone, err := newRemovals(b.kept)
	if err != nil {
		return fail("%v", err)
	}
	// So are the guarded paths' folders; a box whose guarded paths cannot be watched does not
	// start either.
	if guard != nil {
		if err := guard.Scan(); err != nil {
			return fail("guard the workspace's absent protected paths: %v", err)
		}
		go guard.Run()
		defer finishGuard(guard)
	}
	// A stop by keepMounts may still be moving aside what the box created: box-init ends after it.
	stopped := make(chan struct{})
	var stopping atomic.Bool
	defer func() {
		if stopping.Load() {
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return runExecStage(ctl, ex, raw, spec, uint16(*rows), uint16(*cols), sigs, "box-init", func(pid int) {
		// Keep the protected binds in place for the box's life; a loss seen before the program
		// ran is caught by the first read of the mount table.
		go keepMounts(b.kept, gone, func(string) {}, func(msg, removed string) {
			stopping.Store(true)
			defer close(stopped)
			fmt.Fprintf(os.Stderr, "agentbox box-init: %s; stopping the box\n", msg)
			unix.Kill(-1, unix.SIGKILL) // from PID 1: every other process of the box
			if removed == "" {
				return
			}
			if aside, err := quarantine(removed); err != nil {
				fmt.Fprintf(os.Stderr, "agentbox box-init: %s: %v\n", removed, err)
			} else if aside != "" {
				fmt.Fprintf(os.Stderr, "agentbox box-init: what appeared at %s after the host removed it is moved to %s\n", removed, aside)
			}
		})
	}, fail)
}

// finishGuard ends the guard once the program has exited: the box's other processes are
// killed first, so that nothing creates a guarded path after the last pass, which moves out
// what is there and keeps the final content of what the box wrote. box-init exits, and the
// launch's exit is reported, only after it.
func finishGuard(g *changes.Guard) {
	unix.Kill(-1, unix.SIGKILL) // from PID 1: every other process of the box
	for i := 0; i < 200 && othersLeft(); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if err := g.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "agentbox box-init: guarding the protected paths: %v\n", err)
	}
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
			return exitSetupFailed // ECHILD: nothing left to wait for
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
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	defer unix.Close(master)
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		return nil, fmt.Errorf("unlock pty: %w", err)
	}
	slave, err := ptyPeer(master)
	if err != nil {
		return nil, err
	}
	if rows > 0 && cols > 0 {
		if err := unix.IoctlSetWinsize(slave, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
			unix.Close(slave)
			return nil, fmt.Errorf("set pty size: %w", err)
		}
	}
	if err := engine.SendEvent(ctl, engine.Event{Kind: engine.EventPTY}, master); err != nil {
		unix.Close(slave)
		return nil, err
	}
	return os.NewFile(uintptr(slave), "pty"), nil
}

// ptyPeer opens the slave of master read-write (TIOCGPTPEER: no path lookup, so it is the
// master's own peer whatever /dev/pts holds).
func ptyPeer(master int) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		return -1, fmt.Errorf("open pty slave: %w", errno)
	}
	return int(fd), nil
}

// loopbackUp sets IFF_UP on lo.
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr)
}

// closeInherited closes every descriptor from lowest up that survived the execve into this
// process, i.e. that is not close-on-exec; descriptors the Go runtime opened since (cgroup
// files, the poller) are close-on-exec and stay.
func closeInherited(lowest int) error {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	var leaked []int
	buf := make([]byte, 4096)
	for {
		n, err := unix.Getdents(dir, buf)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			fd, err := strconv.Atoi(name)
			if err != nil || fd < lowest || fd == dir {
				continue
			}
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
				leaked = append(leaked, fd)
			}
		}
	}
	for _, fd := range leaked {
		unix.Close(fd)
	}
	return nil
}
