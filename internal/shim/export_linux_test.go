package shim

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Hook sets a test's shim process installs (InstallTestHooks), each forcing one interleaving.
const (
	// HooksStopRace: a stop reaches the shim after it decided to start the box and before the
	// engine starts it (startBox waits for the stop), and the stop is held, once recorded as
	// one before the box, until startBox has looked for such a stop: the interleavings in which
	// a stop recorded after the lock was released went unseen (a detached launch), and in which
	// the stop of a held box being started was taken for one before any start.
	HooksStopRace = "stop-race"
	// HooksWriteFail: the first attached client's connection reader waits, before it reads a
	// frame, until a write to that client has failed and been handled: the interleaving in
	// which a client that sent its detach and closed its connection met a write of the
	// program's output before the reader had read the detach.
	HooksWriteFail = "write-fail"
	// HooksLateWatch: the shim, about to write the final status, waits for a watcher to come
	// (at most hookWait), then lets it be served (at most lateWatchServe); a watcher sent the
	// launch's end meanwhile has the shim wait, before it writes, until the test has looked
	// for status.json (LateWatchChecked): the interleaving in which a watcher that came while
	// the launch ended was sent its end (EventExit) before status.json held it, and the daemon,
	// reading the file at once, recorded the launch lost. And that watcher, served in the final
	// phase, is sent its reply and the end only once the shim has closed its socket and waits
	// for the connections it accepted to be answered (LateAnswerForced): the interleaving in
	// which the shim's process exited first and the watcher found its connection closed
	// without a reply.
	HooksLateWatch = "late-watch"
	// HooksWatchGone: the box's start waits until the first watcher's connection is closed by
	// its end, and that watcher's reader waits, before it reads a request, until a write to a
	// watcher (the box's start, broadcast) has failed and been handled: the interleaving in
	// which the daemon's own watch sent a stop and closed, and the shim, failing to send it the
	// start, closed the connection with the stop unread (TestAttackBadConfigRefusesLaunches
	// "did not settle within a minute").
	HooksWatchGone = "watch-gone"
)

// LateAnswerForced is the file a shim with HooksLateWatch writes in its launch directory once
// it held a watcher that came in the final phase until it waited for that watcher's answer.
const LateAnswerForced = "late-answer-forced"

// LateWatchChecked is the file a test using HooksLateWatch writes in the launch directory
// once it has looked for status.json after its watcher was sent the launch's end.
const LateWatchChecked = "late-watch-checked"

// lateWatchServe bounds how long HooksLateWatch's shim lets a watcher that came be served
// before it writes the status: a shim that serves it only once the status is written never
// does meanwhile.
const lateWatchServe = time.Second

// RaceMarker is the file a shim with test hooks writes in its working launch directory once
// the interleaving its hooks force has happened (the test then knows the race was forced).
const RaceMarker = "race-forced"

// hookWait bounds a hook's wait for the other side of the race; past it the race was not
// forced, no marker is written and the test says so (it never passes by waiting).
const hookWait = 10 * time.Second

// InstallTestHooks installs this process's shim's hooks of set (HooksStopRace,
// HooksWriteFail, HooksLateWatch); launchDir is where RaceMarker goes.
func InstallTestHooks(set, launchDir string) {
	forced := func() { os.WriteFile(filepath.Join(launchDir, RaceMarker), nil, 0o600) }
	// closer closes ch the first time it is called; waitFor reports whether ch closed in time.
	closer := func(ch chan struct{}) func() {
		var once sync.Once
		return func() { once.Do(func() { close(ch) }) }
	}
	waitFor := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-time.After(hookWait):
			return false
		}
	}
	switch set {
	case HooksStopRace:
		recorded, checked := make(chan struct{}), make(chan struct{})
		testHooks.beforeStart = func() { waitFor(recorded) }
		signalRecorded := closer(recorded)
		testHooks.stopBeforeBox = func() {
			signalRecorded()
			if waitFor(checked) {
				forced()
			}
		}
		testHooks.stopChecked = closer(checked)
	case HooksLateWatch:
		// pending counts the watchers that came and do not hold s.mu yet: one that came just
		// before the status was being written waits for s.mu as well, and the test makes no
		// other watch meanwhile (it waits for that one's reply).
		var writing atomic.Bool
		var pending atomic.Int32
		came, ended, awaiting := make(chan struct{}), make(chan struct{}), make(chan struct{})
		cameNow, endedNow := closer(came), closer(ended)
		testHooks.watchCame = func() {
			pending.Add(1)
			if writing.Load() {
				cameNow()
			}
		}
		testHooks.watchLocked = func() { pending.Add(-1) }
		testHooks.watchEnded = endedNow
		testHooks.awaitingAnswers = closer(awaiting)
		testHooks.watchFinal = func() {
			if waitFor(awaiting) {
				os.WriteFile(filepath.Join(launchDir, LateAnswerForced), nil, 0o600)
			}
		}
		testHooks.writingStatus = func() {
			writing.Store(true)
			if pending.Load() > 0 {
				cameNow()
			}
			if !waitFor(came) {
				return
			}
			forced()
			select {
			case <-ended:
				for deadline := time.Now().Add(hookWait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
					if _, err := os.Stat(filepath.Join(launchDir, LateWatchChecked)); err == nil {
						return
					}
				}
			case <-time.After(lateWatchServe):
			}
		}
	case HooksWatchGone:
		gone, failed := make(chan struct{}), make(chan struct{})
		goneNow := closer(gone)
		testHooks.beforeStart = func() { waitFor(gone) }
		testHooks.watchWriteFailed = closer(failed)
		var once sync.Once
		testHooks.watchRead = func(c *net.UnixConn) {
			once.Do(func() {
				if !peerClosed(c) {
					return
				}
				goneNow()
				if waitFor(failed) {
					forced()
				}
			})
		}
	case HooksWriteFail:
		failed := make(chan struct{})
		testHooks.writeFailed = closer(failed)
		var once sync.Once
		testHooks.clientRead = func() {
			once.Do(func() {
				if waitFor(failed) {
					forced()
				}
			})
		}
	}
}

// peerClosed waits, at most hookWait, until the other end of c has closed (POLLRDHUP), and
// reports whether it has.
func peerClosed(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	raw.Control(func(fd uintptr) {
		for deadline := time.Now().Add(hookWait); time.Now().Before(deadline); {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
			if n, _ := unix.Poll(pfd, 10); n > 0 && pfd[0].Revents&(unix.POLLRDHUP|unix.POLLHUP) != 0 {
				closed = true
				return
			}
		}
	})
	return closed
}

// SizeReaderMain is the program of the shim's tests' sizeReader (the test binary's
// "size-reader" command): at each SIGWINCH it reads its terminal's size (on stdin) and appends
// it to the file args[0], one "rowsxcols" a line, and when args[1] is "draw" it then writes a
// line to its terminal (stdout), as a program that draws at every signal (less) does. At
// SIGPWR it appends "mark": a SIGWINCH sent before reaches it first (the kernel, and Go's
// runtime, hand pending signals over lowest number first, and SIGWINCH is 28, SIGPWR 30). It
// writes args[0].ready once it listens. A program of its own, not a shell's trap: a shell runs
// a trap only once the command it waits for has ended, and under load it read the size too
// late for the redraw tests.
func SizeReaderMain(args []string) int {
	if len(args) == 0 {
		return 2
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, unix.SIGWINCH, unix.SIGPWR)
	f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 1
	}
	if err := os.WriteFile(args[0]+".ready", nil, 0o600); err != nil {
		return 1
	}
	draw := len(args) > 1 && args[1] == "draw"
	for sig := range sigs {
		if sig == unix.SIGPWR {
			fmt.Fprintf(f, "mark\n")
			continue
		}
		ws, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ)
		if err != nil {
			return 1
		}
		fmt.Fprintf(f, "%dx%d\n", ws.Row, ws.Col)
		if draw {
			os.Stdout.WriteString("drawn\r\n")
		}
	}
	return 0
}
