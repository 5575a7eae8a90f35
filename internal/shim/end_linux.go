package shim

// The box's end: its top process reaped, its control channel and output drained, its pid
// namespace verified empty (settlement), the final status written and sent.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/atomicfile"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"golang.org/x/sys/unix"
)

// drainTimeout bounds how long the shim waits, once the box's top process has exited, for the
// box's control channel and output to reach their end. With a pid namespace they end at once;
// the bound only protects the shim from an engine without one.
const drainTimeout = 5 * time.Second

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
// init to exit; the shim's own exit then kills it (Pdeathsig).
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
	s.mu.Lock()
	ended := s.nsEnded
	s.mu.Unlock()
	if ended {
		return true // its init had exited before it was pinned: the namespace was empty (initEnded)
	}
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
	// The status is written before the final phase begins, under s.mu: a watcher that comes
	// in the final phase is sent the launch's end at once (serveWatch), and EventExit says the
	// status is in status.json, which the daemon reads as soon as it is sent it. Written after
	// the phase had begun, a watcher that came meanwhile (the daemon's, for a program that
	// ended before its watch began) found no file: the launch was recorded lost.
	s.mu.Lock()
	st := s.status
	testHook(testHooks.writingStatus)
	if err := writeStatus(s.dir, &st); err != nil {
		s.log.Printf("write status: %v", err)
	}
	s.advanceLocked(evFinish)
	s.mu.Unlock()
	s.releaseRelayListener() // its box is gone: the port is expected no more
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
	s.awaitAnswers()
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

// initEnded reports whether the process pid, the init of a box's pid namespace, has exited: it
// is gone (no pidfd can be opened) or a zombie. The kernel ends every other process of a pid
// namespace before its init becomes a zombie (zap_pid_ns_processes), so the namespace is empty
// then. A pid the kernel has given to another process since reads as running: not ended.
func initEnded(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}
