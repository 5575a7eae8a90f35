package shim

import (
	"encoding/json"
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
	"github.com/agentbox/agentbox/internal/atomicfile"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/plan"
	"golang.org/x/sys/unix"
)

// drainTimeout bounds how long the shim waits, once the box's top process has exited, for the
// box's control channel and output to reach their end. With a pid namespace they end at once;
// the bound only protects the shim from an engine without one.
const drainTimeout = 5 * time.Second

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
	pidNSFile      *os.File // holds the box's pid namespace open, so its inode is not reused while settling
	stdinCh        chan stdinItem

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
	// pending are signals for the program that arrived after the start but before the exec:
	// box-init, as PID 1 of a pid namespace, drops signals from outside until it has installed
	// its handlers, so they are sent when the box reports the exec.
	pending []syscall.Signal
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
		tty:      cfg.console() == plan.ConsoleTTY,
		clip:     cfg.Clipboard != console.ClipboardAllow,
		stdinCh:  make(chan stdinItem, 64),
		watchers: map[*watchConn]bool{},
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

// engineHolds reports whether the named engine honours engine.IO.Hold (ok false: unknown).
func engineHolds(name string) (holds, ok bool) {
	eng, err := engine.Get(name)
	if err != nil {
		return false, false
	}
	h, isHolder := eng.(engine.Holder)
	return isHolder && h.HoldsStart(), true
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

type startError struct{ code, msg string }

func (e *startError) Error() string { return e.msg }

// codeFor maps an engine start error to its wire code.
func codeFor(err error) string {
	switch {
	case errors.Is(err, engine.ErrProgramNotFound):
		return engine.CodeProgramNotFound
	case errors.Is(err, engine.ErrProgramNotExec):
		return engine.CodeProgramNotExec
	case errors.Is(err, engine.ErrUnknownEngine):
		return engine.CodeUnknownEngine
	case errors.Is(err, engine.ErrNotSupported):
		return engine.CodeEngineUnsupported
	}
	return engine.CodeBoxSetupFailed
}

// startBox starts the box through the engine and the goroutines that serve it; with hold, the
// box waits for release before it starts the program.
func (s *server) startBox(hold bool) error {
	eng, err := engine.Get(s.cfg.Engine)
	if err != nil {
		return &startError{codeFor(err), err.Error()}
	}
	shimEnd, boxEnd, err := engine.ControlPair()
	if err != nil {
		return &startError{engine.CodeBoxSetupFailed, err.Error()}
	}
	bio := engine.IO{Control: boxEnd, Hold: hold}
	if s.tty {
		s.mu.Lock()
		bio.Rows, bio.Cols = s.size.Rows, s.size.Cols
		s.mu.Unlock()
	}
	var boxEnds []*os.File // the box's copies, closed once it has them
	boxEnds = append(boxEnds, boxEnd)
	var stdoutR, stderrR *os.File
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	fail := func(err error) error {
		closeAll(boxEnds...)
		closeAll(shimEnd, stdoutR, stderrR, s.stdinW, s.logOut)
		return &startError{engine.CodeBoxSetupFailed, err.Error()}
	}
	switch {
	case s.tty && s.cfg.Detached:
		// The PTY is the program's stdin and output; what it writes while no client is
		// attached is kept in the log (an attached launch opens it when its client detaches:
		// deliver).
		out, err := os.OpenFile(filepath.Join(s.dir, launchdir.OutputFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fail(err)
		}
		s.logOut = out
	case s.tty:
	case s.cfg.Detached:
		null, err := os.Open(os.DevNull)
		if err != nil {
			return fail(err)
		}
		boxEnds = append(boxEnds, null)
		out, err := os.OpenFile(filepath.Join(s.dir, launchdir.OutputFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fail(err)
		}
		boxEnds = append(boxEnds, out)
		bio.Stdin, bio.Stdout, bio.Stderr = null, out, out
	default:
		inR, inW, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		boxEnds = append(boxEnds, inR)
		s.stdinW = inW
		outR, outW, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		boxEnds = append(boxEnds, outW)
		stdoutR = outR
		errR, errW, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		boxEnds = append(boxEnds, errW)
		stderrR = errR
		bio.Stdin, bio.Stdout, bio.Stderr = inR, outW, errW
	}

	testHook(testHooks.beforeStart)
	var box *engine.Box
	if pre := s.pre; pre != nil {
		s.pre = nil
		if s.cfg.Engine == pre.engine {
			box, err = pre.box.Start(s.req, bio)
			switch {
			case err == nil:
				shimEnd.Close()
				shimEnd = pre.box.Control()
			case errors.Is(err, engine.ErrPrestartUnusable):
				s.log.Printf("prestarted box-init not used: %v", err)
				pre.box.Discard()
				box, err = nil, nil
			default:
				pre.box.Discard()
			}
		} else {
			pre.box.Discard()
		}
	}
	if box == nil && err == nil {
		box, err = eng.Start(s.req, bio)
	}
	if s.afterStart != nil {
		s.afterStart()
		s.afterStart = nil
	}
	if err != nil {
		closeAll(boxEnds...)
		closeAll(shimEnd, stdoutR, stderrR, s.stdinW, s.logOut)
		return &startError{codeFor(err), err.Error()}
	}
	closeAll(boxEnds...)
	pid := box.Process.Pid
	inodes := map[string]uint64{}
	for _, name := range ns.Kinds {
		// The box's namespaces are its PID 1's, which is not always its top process (bwrap).
		if ino, err := ns.Inode(box.NamespacePid(), name); err == nil {
			inodes[name] = ino
		} else {
			s.log.Printf("read namespaces of box %d: %v", pid, err)
		}
	}

	// Pin the box's pid namespace: while this descriptor is open the namespace's inode number
	// cannot be given to another namespace, so the settlement scan and its kills never match
	// processes of an unrelated namespace.
	if f, err := os.Open(fmt.Sprintf("/proc/%d/ns/pid", box.NamespacePid())); err == nil {
		if st, err := f.Stat(); err == nil && st.Sys() != nil {
			s.pidNSFile = f
		} else {
			f.Close()
		}
	} else {
		s.log.Printf("pin pid namespace of box %d: %v", pid, err)
	}

	// The top process is the init of the box's pid namespace (the native engine's box-init;
	// not bwrap, whose top process is outside): once the shim has reaped it, the kernel has
	// ended and released every other process of the namespace (settle).
	topIsInit := pid == box.NamespacePid() && ns.InnermostPid(pid) == 1

	s.mu.Lock()
	s.box = box
	s.ctl = shimEnd
	s.topIsInit = topIsInit
	if hold {
		s.advanceLocked(evStartHeld)
	} else {
		s.advanceLocked(evStart)
	}
	s.status.BoxPid = pid
	s.status.Namespaces = inodes
	s.status.Started = time.Now().UTC()
	s.broadcastLocked(EventStarted)
	// A stop recorded while there was no box (stop) came while the box was being started.
	stopAsked := s.st.stopAsked
	s.mu.Unlock()
	s.log.Printf("box started: pid %d, namespaces %v", pid, inodes)
	if stopAsked {
		s.stop()
	}
	testHook(testHooks.stopChecked)

	go s.waitBox(topIsInit)
	go s.readControl(shimEnd)
	if !s.tty && !s.cfg.Detached {
		s.mu.Lock()
		s.outputs = append(s.outputs, stdoutR, stderrR)
		s.advanceLocked(evOutput)
		s.advanceLocked(evOutput)
		s.mu.Unlock()
		go s.pump(stdoutR, console.FrameStdout)
		go s.pump(stderrR, console.FrameStderr)
		go s.writeStdin(s.stdinW)
	}
	return nil
}

// waitBox reaps the box's top process; topIsInit says it is its pid namespace's init.
func (s *server) waitBox(topIsInit bool) {
	ps, err := s.box.Process.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := evExit
	if err != nil {
		s.log.Printf("wait for box: %v", err)
	} else {
		ws := ps.Sys().(syscall.WaitStatus)
		code := ws.ExitStatus()
		if ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		if !s.st.ended {
			// (after an end the init reported, the program's code is the one it reported)
			s.status.ExitCode = &code
		}
		if topIsInit {
			ev = evInitExit
		}
		s.log.Printf("box exited: %v (code %d)", ps, code)
	}
	s.advanceLocked(ev)
	s.releaseHandedLocked()
}

// releaseHandedLocked closes the inotify instances box-init handed over (s.mu held), each on
// a goroutine of its own: a close returns once the kernel has freed the instance's watches,
// after a grace period, which the shim's exit alone waits for.
func (s *server) releaseHandedLocked() {
	for _, fd := range s.handed {
		go unix.Close(fd)
	}
	s.handed = nil
}

// supervise waits for the box to end, then settles it, writes the status and tells everyone.
func (s *server) supervise() {
	s.await(func(st state) bool { return st.phase >= phaseExited }, nil)
	expired, release := expiry(drainTimeout)
	defer release()
	if _, ok := s.await(func(st state) bool { return st.controlClosed }, expired); !ok {
		s.log.Printf("control channel still open %v after the box exited", drainTimeout)
	}
	if _, ok := s.await(func(st state) bool { return st.outputs == 0 }, expired); !ok {
		s.log.Printf("box output still open %v after the box exited: closing it", drainTimeout)
		s.mu.Lock()
		for _, f := range s.outputs {
			f.Close()
		}
		s.mu.Unlock()
		s.await(func(st state) bool { return st.outputs == 0 }, nil)
	}

	s.mu.Lock()
	pidNS := s.status.Namespaces["pid"]
	byInit := s.st.emptied
	s.mu.Unlock()
	settled := s.settle(pidNS, byInit)

	s.mu.Lock()
	st := &s.status
	st.Settled = settled
	st.Ended = time.Now().UTC()
	switch {
	case st.Execd:
		st.State = api.StateExited
	case s.errEvent != nil:
		st.State = api.StateFailed
		st.Error = s.errEvent
		st.ExitCode = nil
	default:
		st.State = api.StateFailed
		msg := "the box ended before its program started"
		if st.ExitCode != nil {
			msg = fmt.Sprintf("%s (box status %d)", msg, *st.ExitCode)
		}
		st.Error = &api.Error{Code: CodeBoxLost, Message: msg}
		st.ExitCode = nil
	}
	s.mu.Unlock()
	s.finish()

	// After an end the init reported (EventEnded) its exit may still be under way: the shim
	// stays its parent until it is reaped, so that no process of the box outlives the shim.
	reaped, releaseReap := expiry(reapTimeout)
	defer releaseReap()
	if _, ok := s.await(func(st state) bool { return st.reaped }, reaped); !ok {
		s.log.Printf("box-init not reaped %v after the box's end: the shim's exit kills it", reapTimeout)
	}
}

// reapTimeout bounds how long the shim waits, after the box's end its init reported, for the
// init to exit (its watches released); the shim's own exit then kills it (Pdeathsig).
const reapTimeout = 10 * time.Second

// settle verifies that no process of the box's pid namespace remains, killing stragglers.
// byInit says that the box's top process, the init of its pid namespace, has been reaped: the
// kernel kills every other process of a pid namespace when its init exits, and lets the init
// be reaped only once all of them are gone, zombies and processes whose parent is outside the
// namespace included (zap_pid_ns_processes, since Linux 4.11): the namespace is empty, and no
// scan is needed. Otherwise (a top process outside the namespace: bwrap) a scan of /proc
// looks for what remains. settleAttempts bounds the settlement scan (20 ms apart).
const settleAttempts = 1500

func (s *server) settle(pidNS uint64, byInit bool) bool {
	if pidNS == 0 {
		s.log.Printf("settlement: the box's pid namespace is unknown")
		return false
	}
	own, err := ns.Inode(os.Getpid(), "pid")
	if err == nil && own == pidNS {
		s.log.Printf("settlement: the box shares the shim's pid namespace; cannot verify")
		return false
	}
	if s.pidNSFile == nil {
		// Without the pin an inode number may already belong to another namespace: never kill
		// by it.
		s.log.Printf("settlement: the box's pid namespace was not pinned; cannot verify")
		return false
	}
	defer func() {
		s.pidNSFile.Close()
		s.pidNSFile = nil
	}()
	if byInit {
		return true
	}
	// Bounded generously: on a loaded machine the kernel may take a while to reap a dying
	// namespace's processes.
	for attempt := 0; attempt < settleAttempts; attempt++ {
		pids, err := ns.Remaining(pidNS)
		if err != nil {
			s.log.Printf("settlement: %v", err)
			return false
		}
		if len(pids) == 0 {
			return true
		}
		if attempt == 0 {
			s.log.Printf("settlement: %d process(es) left in the box: %v; killing", len(pids), pids)
		}
		for _, pid := range pids {
			ns.Kill(pid, pidNS)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.log.Printf("settlement: processes remain in the box's pid namespace")
	return false
}

// finishUnstarted ends a launch whose box never started.
func (s *server) finishUnstarted(code, msg string, stopped bool) {
	s.log.Printf("launch failed before the box started: %s: %s", code, msg)
	s.mu.Lock()
	s.status.State = api.StateFailed
	s.status.Error = &api.Error{Code: code, Message: msg}
	s.status.Settled = true
	s.status.Stopped = stopped
	s.status.Ended = time.Now().UTC()
	s.mu.Unlock()
	s.finish()
}

// finish writes the final status, sends it to the attached client and the watchers, and closes
// the socket.
func (s *server) finish() {
	s.mu.Lock()
	s.advanceLocked(evFinish)
	st := s.status
	s.mu.Unlock()
	if err := writeStatus(s.dir, &st); err != nil {
		s.log.Printf("write status: %v", err)
	}
	exit := exitFrame(&st)

	s.mu.Lock()
	c := s.client
	if c != nil {
		s.client = nil
		s.advanceLocked(evDetach)
	}
	s.broadcastLocked(EventExit)
	ws := s.watchers
	s.watchers = map[*watchConn]bool{}
	for range ws {
		s.advanceLocked(evUnwatch)
	}
	s.mu.Unlock()

	if c != nil {
		if err := c.fw.WriteFrame(console.FrameExit, exit); err != nil {
			s.log.Printf("send exit to client: %v", err)
		}
		c.conn.CloseWrite()
	}
	for w := range ws {
		w.conn.CloseWrite()
	}
	s.awaitLateClient(&st)
	s.ln.Close()
	s.log.Printf("launch ended: state %s, exit %v, error %v, settled %v", st.State, ptrInt(st.ExitCode), st.Error, st.Settled)
	// Let the client read the end and close first (its connection reader keeps draining what
	// it sends): a unix socket closed with unread input resets its peer.
	if c != nil {
		select {
		case <-c.done:
		case <-time.After(2 * time.Second):
			c.conn.Close()
		}
	}
}

// awaitLateClient keeps the socket open, until the client attaches or the attach deadline, for
// an attached launch whose box failed to set up before its client came: so that the client
// gets the reason (the exit frame of the final status), not a refused connection.
func (s *server) awaitLateClient(st *Status) {
	if s.cfg.Detached || st.Error == nil || st.Stopped || st.Error.Code == CodeAttachTimeout {
		return
	}
	expired, release := expiry(time.Until(s.attachDeadline))
	defer release()
	// (a client that has attached has got, or gets, the exit frame)
	s.await(func(st state) bool { return st.attached }, expired)
}

// writeStatus writes st to L/status.json atomically (temporary file, fsync, rename).
func writeStatus(dir string, st *Status) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, launchdir.StatusFile), append(b, '\n'), 0o600)
}

func ptrInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
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
