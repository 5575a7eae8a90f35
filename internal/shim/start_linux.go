package shim

// The box's start: the engine asked to start it (from a prestarted box-init when there is one)
// with the console streams of the launch's mode, its namespaces read and its pid namespace
// pinned, and the goroutines that serve it started.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/ns"
)

// engineHolds reports whether the named engine honours engine.IO.Hold (ok false: unknown).
func engineHolds(name string) (holds, ok bool) {
	eng, err := engine.Get(name)
	if err != nil {
		return false, false
	}
	h, isHolder := eng.(engine.Holder)
	return isHolder && h.HoldsStart(), true
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
	if s.pidNSFile == nil && initEnded(box.NamespacePid()) {
		// A box whose program ended before its namespaces could be read (the bwrap engine,
		// which does not hold the program's start, under load): its PID 1 has exited, and the
		// kernel had ended every other process of the namespace before (settle).
		s.mu.Lock()
		s.nsEnded = true
		s.mu.Unlock()
		s.log.Printf("the box's PID 1 (%d) had exited before its namespaces were read: its pid namespace is empty", box.NamespacePid())
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
