package shim

import (
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/plan"
	"golang.org/x/sys/unix"
)

// server is the state of one shim.
type server struct {
	dir string
	cfg Config
	req []byte
	log *log.Logger
	// afterStart, when set, runs once the engine has been asked to start the box (whether or
	// not it could), before the rest of startBox.
	afterStart func()
	tty        bool
	clip       bool // filter clipboard sequences from output

	pre            *prestarted // a box started ahead (spare shims), used by startBox or discarded
	ctl            *os.File    // the shim's end of the box's control socket
	attachDeadline time.Time   // when an attached launch gives up waiting for its client
	ln             *net.UnixListener
	// answering counts the connections accepted and not answered yet (each one's answered,
	// called once: a status or the launch's end sent, a watcher or client installed, or the
	// connection refused or lost); acceptEnded is closed when acceptLoop has returned, so that
	// nothing is added to answering after it. finish waits for both (awaitAnswers).
	answering   sync.WaitGroup
	acceptEnded chan struct{}
	pidNSFile   *os.File // holds the box's pid namespace open, so its inode is not reused while settling
	nsEnded     bool     // the box's PID 1 had exited before its namespaces were read (initEnded)
	stdinCh     chan stdinItem

	// mu guards what follows. What the shim's goroutines wait for (the box's exit, a client,
	// the end of its control channel and output, the final status) are the launch's events,
	// recorded in st (advanceLocked) and waited for with await.
	mu       sync.Mutex
	status   Status
	box      *engine.Box
	master   *os.File
	size     console.WindowSize
	client   *attachment
	watchers map[*watchConn]bool
	stdinW   *os.File      // pipe mode: the box's stdin (nil once closed)
	logOut   *os.File      // tty mode: where the PTY output goes while no client is attached (opened by the pump when first needed, or at the start when detached)
	outputs  []*os.File    // the box's output streams (pipes or PTY master) the pumps read
	st       state         // where the launch is, and its requests (advanceLocked; transitions)
	changed  chan struct{} // closed at the launch's next event (advanceLocked), for await; nil while nobody waits
	errEvent *api.Error    // EventError from the box
	// topIsInit: the box's top process is the init of its pid namespace (the native engine's
	// box-init), whose report of the box's end (engine.EventEnded) the shim takes.
	topIsInit bool
	// handed are the inotify instances box-init handed over with its report of the box's
	// end, closed once it has been reaped (releaseHandedLocked).
	handed []int
	// relayLn is the relay's shared loopback listener (egress: allow) the daemon handed over
	// to hold while the box runs, so that no other process can take its port while no daemon
	// runs (listener_linux.go); 0 or less when none is held (fd 0 is the shim's /dev/null).
	relayLn int
	// pending are signals for the program that arrived after the start but before the exec:
	// box-init, as PID 1 of a pid namespace, drops signals from outside until it has installed
	// its handlers, so they are sent when the box reports the exec.
	pending []syscall.Signal
	// ptyReads counts the reads of the PTY's output delivered (tty mode): a redraw tells by it
	// whether the program is still drawing (quiet).
	ptyReads uint64
}

// testHooks force interleavings in tests (each nil outside tests; export_linux_test.go sets
// them in a test's shim process).
var testHooks struct {
	// beforeStart runs in startBox before the engine starts the box; stopBeforeBox in stop()
	// after it recorded a stop that came before the box was set; stopChecked in startBox after
	// it looked for such a stop.
	beforeStart, stopBeforeBox, stopChecked func()
	// clientRead runs in an attached client's connection reader before it reads a frame;
	// writeFailed in deliver after a write to the client failed and was handled.
	clientRead, writeFailed func()
	// writingStatus runs in finish just before the final status is written; watchCame in
	// serveWatch before it takes s.mu; watchEnded after it sent a watcher that came once the
	// launch had ended its final status.
	writingStatus, watchCame, watchEnded func()
	// watchLocked runs in serveWatch once it holds s.mu; watchFinal in serveWatch before it
	// sends a watcher that came in the final phase the launch's end (s.mu not held);
	// awaitingAnswers in finish once the socket is closed and no connection is accepted any
	// more, before it waits for those accepted to be answered.
	watchLocked, watchFinal, awaitingAnswers func()
	// watchRead runs in a watcher's reader before it reads a request; watchWriteFailed in
	// broadcastLocked after a write to a watcher failed and was handled.
	watchRead        func(*net.UnixConn)
	watchWriteFailed func()
}

// testHook runs h unless it is nil.
func testHook(h func()) {
	if h != nil {
		h()
	}
}

// run serves the launch in dir; sigs (subscribeSignals) stop its box.
func run(dir string, lg *log.Logger, report func(error), pre *prestarted, sigs chan os.Signal, handed *os.File) error {
	// Engines start the box with Pdeathsig (the box dies with its shim), which the kernel ties to
	// the thread that forked: keep this goroutine, which starts the box, on one thread for good.
	runtime.LockOSThread()
	unix.Umask(0o077)
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	sock := filepath.Join(dir, launchdir.SocketFile)
	var ln *net.UnixListener
	if handed != nil {
		// The socket the daemon made and handed over with the launch (Spare.Hand): its client
		// may be connected already, and waits for the answer.
		if ln, err = handedListener(handed, sock); err != nil {
			return err
		}
	}
	cfg, err := ReadConfig(dir)
	if err != nil {
		return refuseHanded(ln, lg, report, err)
	}
	req, err := os.ReadFile(filepath.Join(dir, launchdir.RequestFile))
	if err != nil {
		return refuseHanded(ln, lg, report, fmt.Errorf("read engine request: %w", err))
	}
	s := &server{
		dir: dir, cfg: cfg, req: req, log: lg, pre: pre,
		tty:         cfg.console() == plan.ConsoleTTY,
		clip:        cfg.Clipboard != console.ClipboardAllow,
		stdinCh:     make(chan stdinItem, 64),
		watchers:    map[*watchConn]bool{},
		acceptEnded: make(chan struct{}),
		relayLn:     -1,
		status: Status{
			LaunchID: cfg.LaunchID,
			State:    api.StateStarting,
			ShimPid:  os.Getpid(),
		},
	}
	s.size = cfg.Size
	if ln == nil {
		if ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"}); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		if err := os.Chmod(sock, 0o600); err != nil {
			ln.Close()
			return fmt.Errorf("listen: %w", err)
		}
	}
	ln.SetUnlinkOnClose(true)
	s.ln = ln
	go s.acceptLoop()
	// With a prestarted box-init, the request goes to it before the daemon hears that this shim
	// is ready: building the box is the longest step before the program starts, and it then
	// overlaps the daemon's answer and the client's attach. (A fresh box-init takes longer to
	// start than that; the daemon is told first.)
	reported := false
	ready := func() {
		if !reported {
			reported = true
			report(nil)
		}
	}
	h, ok := engineHolds(cfg.Engine)
	hold := ok && h && !cfg.Detached
	if hold && s.pre != nil {
		s.afterStart = ready
	} else {
		ready()
	}
	lg.Printf("launch %s: listening on %s (engine %s, console %s, detached %v)", cfg.LaunchID, sock, cfg.Engine, cfg.console(), cfg.Detached)

	go func() {
		for sig := range sigs {
			lg.Printf("received %v: stopping the box", sig)
			s.stop()
		}
	}()

	startBox := func(hold bool) (bool, error) {
		err := s.startBox(hold)
		ready() // (before a failure's status, which may wait for a late client)
		var se *startError
		if errors.As(err, &se) {
			s.finishUnstarted(se.code, se.msg, false)
			return false, nil
		}
		return err == nil, err
	}
	// An attached launch builds its box while its client is on the way (engines that can hold
	// the program's start until the client is there); the program starts when it attaches.
	timeout := cfg.AttachTimeout
	if timeout == 0 {
		timeout = DefaultAttachTimeout
	}
	// Set before the box starts: a box that fails before its client attached keeps its status
	// for the client until then (awaitLateClient).
	s.attachDeadline = time.Now().Add(timeout)
	if hold {
		if ok, err := startBox(true); !ok {
			return err
		}
	}
	if !cfg.Detached {
		// The first of: a stop, the held box's end, the client's attach, the attach deadline.
		expired, release := expiry(time.Until(s.attachDeadline))
		st, ok := s.await(func(st state) bool {
			return st.stopAsked || st.phase >= phaseExited || st.attached
		}, expired)
		release()
		switch {
		case !ok:
			msg := fmt.Sprintf("no client attached within %v", timeout)
			if hold {
				s.abortHeld(CodeAttachTimeout, msg)
				s.supervise()
				return nil
			}
			s.finishUnstarted(CodeAttachTimeout, msg, false)
			return nil
		case st.stopAsked:
			if hold {
				// The stop came while the held box was being started, and startBox has
				// stopped it since: it ends as any started box does, settled by supervise.
				s.supervise()
				return nil
			}
			s.finishUnstarted(CodeStoppedBeforeStart, "stopped before the box started", true)
			return nil
		case st.phase >= phaseExited:
			// The held box ended before a client attached: stopped, or its set-up failed (the
			// status then waits for the client, see finish).
			s.supervise()
			return nil
		}
	}
	if hold {
		s.release()
	} else if ok, err := startBox(false); !ok {
		return err
	}
	s.supervise()
	return nil
}

// release lets a held box start its program, with the PTY size the client attached with.
func (s *server) release() {
	s.mu.Lock()
	ctl, size := s.ctl, s.size
	s.advanceLocked(evRelease)
	s.mu.Unlock()
	if err := engine.SendEvent(ctl, engine.Event{Kind: engine.EventGo, Rows: size.Rows, Cols: size.Cols}); err != nil {
		// The box is gone already; supervision reports how it ended.
		s.log.Printf("release the box: %v", err)
	}
}

// abortHeld ends a held box whose program never started, for the reason code.
func (s *server) abortHeld(code, msg string) {
	s.log.Printf("ending the box before its program started: %s: %s", code, msg)
	s.mu.Lock()
	if s.errEvent == nil {
		s.errEvent = &api.Error{Code: code, Message: msg}
	}
	p := s.box.Process
	s.mu.Unlock()
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.log.Printf("end held box: %v", err)
	}
}

// stop stops the box: SIGTERM to its top process (which forwards it to the program), then
// SIGKILL after the grace period. Before the box started, the launch ends without starting it.
func (s *server) stop() {
	s.mu.Lock()
	s.advanceLocked(evStop)
	if s.box == nil {
		// Recorded under the lock that startBox holds while it sets the box and reads the
		// record: a stop is either seen there (box nil here) or finds the box. Recorded after
		// the unlock, a stop landing between the two was lost: startBox had already looked, and
		// a detached launch has nothing else that waits for a stop.
		s.mu.Unlock()
		testHook(testHooks.stopBeforeBox)
		return
	}
	if s.status.Stopped || s.st.phase >= phaseExited { // stopping already, or over
		s.mu.Unlock()
		return
	}
	s.status.Stopped = true
	p := s.box.Process
	execd := s.status.Execd
	if !execd && s.st.phase == phaseHeld && s.errEvent == nil {
		s.errEvent = &api.Error{Code: CodeStoppedBeforeStart, Message: "stopped before the program started"}
	}
	s.mu.Unlock()
	if !execd {
		// The program has not started: nothing to stop gracefully, and box-init may not handle
		// SIGTERM yet.
		s.log.Printf("stop before the program started: SIGKILL to the box")
		if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.log.Printf("stop: %v", err)
		}
		return
	}
	grace := s.cfg.StopGrace
	if grace == 0 {
		grace = DefaultStopGrace
	}
	s.log.Printf("stop: SIGTERM to the box, SIGKILL in %v", grace)
	if err := p.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.log.Printf("stop: %v", err)
	}
	go func() {
		expired, release := expiry(grace)
		defer release()
		if _, exited := s.await(func(st state) bool { return st.phase >= phaseExited }, expired); !exited {
			s.log.Printf("stop: grace period over: SIGKILL to the box")
			if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				s.log.Printf("stop: %v", err)
			}
		}
	}()
}

// signalBox sends sig to the box's top process, which forwards it to the program.
func (s *server) signalBox(sig syscall.Signal) {
	if !relayedSignals[sig] {
		s.log.Printf("signal %d refused: not relayed", sig)
		return
	}
	s.mu.Lock()
	var p *os.Process
	if s.box != nil && s.st.phase < phaseExited {
		if !s.status.Execd {
			s.pending = append(s.pending, sig)
			s.mu.Unlock()
			return
		}
		p = s.box.Process
	}
	s.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		s.log.Printf("signal %v: %v", sig, err)
	}
}
