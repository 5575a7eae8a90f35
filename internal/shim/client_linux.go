package shim

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/proc"
)

// Executable is the program Start runs as `EXE box-shim L`. The default re-executes the running
// binary; the daemon points it at its sealed copy of the box helper (/proc/self/fd/N, see
// boxhelper.Image), tests at a test binary. It is never a path a box could write.
var Executable = "/proc/self/exe"

// Start starts the shim of the launch in launchDir (which holds shim.json and request.json):
// `agentbox box-shim L` in its own session, stdin and stdout on /dev/null, stderr appended to
// L/shim.log, and fd 3 a pipe on which the shim reports readiness. It returns the shim's pid once
// the shim listens on L/shim.sock, or the error the shim reported. The caller does not need to
// wait for the shim: it is reaped in the background while the caller lives, and by init after.
func Start(launchDir string) (Proc, error) {
	dir, err := filepath.Abs(launchDir)
	if err != nil {
		return Proc{}, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, launchdir.ShimLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return Proc{}, fmt.Errorf("start shim: %w", err)
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return Proc{}, fmt.Errorf("start shim: %w", err)
	}
	defer pr.Close()
	p, err := startShimProcess([]string{dir}, logf, pw)
	pw.Close()
	if err != nil {
		return Proc{}, fmt.Errorf("start shim: %w", err)
	}
	return awaitReady(pr, p, dir)
}

// Proc identifies a shim process across pid reuse: its pid and its start time (clock ticks
// since boot, proc.StartTime). The start time is read before the process can be reaped, so a
// shim that ends at once (a short detached launch) is still identified.
type Proc struct {
	Pid       int
	StartTime uint64
}

// startShimProcess starts `EXE box-shim ARGS…` in its own session with stdin and stdout on
// /dev/null, stderr on stderr, and fd 3 on fd3. It is reaped in the background, after its
// start time is read.
func startShimProcess(args []string, stderr, fd3 *os.File) (Proc, error) {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return Proc{}, err
	}
	defer null.Close()
	if stderr == nil {
		stderr = null
	}
	cmd := exec.Command(Executable, append([]string{"box-shim"}, args...)...)
	cmd.Args[0] = "agentbox"
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, stderr
	cmd.ExtraFiles = []*os.File{fd3}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Proc{}, err
	}
	// Unreaped, the process's /proc entry stays until cmd.Wait below, even if it has ended.
	start, err := proc.StartTime(cmd.Process.Pid)
	if err != nil {
		// Unidentified, it could not be supervised: it ends here, before it takes a launch.
		cmd.Process.Kill()
		cmd.Wait()
		return Proc{}, fmt.Errorf("read the shim's start time: %w", err)
	}
	go cmd.Wait()
	return Proc{Pid: cmd.Process.Pid, StartTime: start}, nil
}

// awaitReady reads the shim's readiness line from r.
func awaitReady(r io.Reader, p Proc, dir string) (Proc, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	line = strings.TrimSuffix(line, "\n")
	switch {
	case line == "ready":
		return p, nil
	case strings.HasPrefix(line, "error: "):
		return Proc{}, fmt.Errorf("start shim: %s", strings.TrimPrefix(line, "error: "))
	case err != nil:
		return Proc{}, fmt.Errorf("start shim: exited without reporting readiness (see %s)", filepath.Join(dir, launchdir.ShimLogFile))
	}
	return Proc{}, fmt.Errorf("start shim: unexpected readiness line %q", line)
}

// Spare is a shim started ahead of its launch (`agentbox box-shim -spare`), so that a launch
// does not wait for a process to start: it waits on fd 3, a socket, for the launch directory,
// then runs exactly as a shim Start would have started. It exits when the socket closes
// without one (the daemon closed it, or died).
type Spare struct {
	proc Proc
	conn *os.File
}

// StartSpare starts a spare shim.
func StartSpare() (*Spare, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("spare shim: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "spare"), os.NewFile(uintptr(fds[1]), "spare")
	p, err := startShimProcess([]string{spareArg}, nil, theirs)
	theirs.Close()
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("spare shim: %w", err)
	}
	return &Spare{proc: p, conn: ours}, nil
}

// Pid is the spare's process id.
func (s *Spare) Pid() int { return s.proc.Pid }

// Proc is the spare's pid and start time.
func (s *Spare) Proc() Proc { return s.proc }

// Launch hands the spare the launch in launchDir and returns its pid once it has taken it, as
// Start does. The spare is used up either way.
func (s *Spare) Launch(launchDir string) (Proc, error) {
	h, err := s.Hand(launchDir)
	if err != nil {
		return Proc{}, err
	}
	return h.Wait()
}

// Handed is a launch handed to a spare shim (Spare.Hand) whose answer has not been read yet.
type Handed struct {
	s   *Spare
	dir string
}

// Hand gives the spare the launch in launchDir together with the launch's shim socket,
// L/shim.sock, which it makes here, 0600 and listening, and passes over the spare's socket
// (SCM_RIGHTS) without keeping a copy. So a client can connect as soon as Hand returns: its
// connection waits in the socket's backlog, and the shim answers it once it has taken the
// launch, without the round trip of the shim's readiness on the way (a shim that fails first
// refuses it with the reason, or, when it cannot, ends and resets it). The spare is used up
// either way; Wait reads whether it took the launch. A spare that is gone fails here, with
// the socket removed, so that another shim can listen there.
func (s *Spare) Hand(launchDir string) (*Handed, error) {
	dir, err := filepath.Abs(launchDir)
	if err != nil {
		s.conn.Close()
		return nil, err
	}
	sock := filepath.Join(dir, launchdir.SocketFile)
	lfd, err := listenSocket(sock)
	if err != nil {
		s.conn.Close()
		return nil, fmt.Errorf("start shim: %w", err)
	}
	err = unix.Sendmsg(int(s.conn.Fd()), []byte(dir+"\n"), unix.UnixRights(lfd), nil, 0)
	unix.Close(lfd) // the spare has its own copy now, or none: the socket ends with it
	if err != nil {
		s.conn.Close()
		os.Remove(sock)
		return nil, fmt.Errorf("start shim: hand the launch to the spare shim: %w", err)
	}
	return &Handed{s: s, dir: dir}, nil
}

// Wait returns the spare's pid and start time once it has taken the launch (it listens, and
// with a prestarted box its request is on the way), or the error it reported, as Start does.
func (h *Handed) Wait() (Proc, error) {
	defer h.s.conn.Close()
	return awaitReady(h.s.conn, h.s.proc, h.dir)
}

// Close ends the wait for the spare's answer without reading it (an undo).
func (h *Handed) Close() error { return h.s.conn.Close() }

// listenSocket makes the unix socket at path, 0600 before it listens (a connection attempt
// before then is refused), and returns its descriptor.
func listenSocket(path string) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("listen %s: %w", path, err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("listen %s: %s: %w", path, what, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return fail("bind", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		os.Remove(path)
		return fail("chmod", err)
	}
	if err := unix.Listen(fd, listenBacklog); err != nil {
		os.Remove(path)
		return fail("listen", err)
	}
	return fd, nil
}

// listenBacklog is the backlog of a shim socket made by Hand (what net.Listen would use, the
// kernel's somaxconn, is more than a shim's few clients need).
const listenBacklog = 64

// Close ends an unused spare (it exits on EOF).
func (s *Spare) Close() error { return s.conn.Close() }

// Query asks a running shim for its current status.
func Query(launchDir string) (*Status, error) {
	c, err := console.Dial(filepath.Join(launchDir, launchdir.SocketFile), console.Hello{Role: console.RoleStatus})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var st Status
	if err := json.Unmarshal(c.Reply.Status, &st); err != nil {
		return nil, fmt.Errorf("%w: status: %v", console.ErrProtocol, err)
	}
	return &st, nil
}

// Watcher is the daemon's connection to a shim: status events in, stop and signal requests out.
type Watcher struct {
	// Events delivers the status when the watch began (EventStatus), then started, exec and
	// exit events. It is closed when the connection ends: after EventExit, or if the shim died
	// (then read L/status.json, and if there is none the launch is lost).
	Events <-chan Event

	c  *console.Conn
	mu sync.Mutex
}

// Watch connects to the shim of the launch in launchDir as a watcher.
func Watch(launchDir string) (*Watcher, error) {
	c, err := console.Dial(filepath.Join(launchDir, launchdir.SocketFile), console.Hello{Role: console.RoleWatch})
	if err != nil {
		return nil, err
	}
	var st Status
	if err := json.Unmarshal(c.Reply.Status, &st); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: status: %v", console.ErrProtocol, err)
	}
	ch := make(chan Event, 16)
	ch <- Event{Kind: EventStatus, Status: st}
	w := &Watcher{Events: ch, c: c}
	go func() {
		defer close(ch)
		for {
			line, err := console.ReadLine(c.R)
			if err != nil {
				return
			}
			var ev Event
			if err := json.Unmarshal(line, &ev); err != nil {
				return
			}
			ch <- ev
			if ev.Kind == EventExit {
				return
			}
		}
	}()
	return w, nil
}

func (w *Watcher) send(r Request) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := console.WriteJSONLine(w.c, r); err != nil {
		return fmt.Errorf("%s request to shim: %w", r.Op, err)
	}
	return nil
}

// Stop asks the shim to stop the box (SIGTERM, then SIGKILL after the configured grace). The
// outcome arrives as EventExit.
func (w *Watcher) Stop() error { return w.send(Request{Op: OpStop}) }

// Signal asks the shim to send sig to the box, which forwards it to the program.
func (w *Watcher) Signal(sig syscall.Signal) error {
	if sig <= 0 {
		return errors.New("signal: invalid signal")
	}
	return w.send(Request{Op: OpSignal, Signal: int(sig)})
}

// Close ends the watch; the shim and its box are unaffected.
func (w *Watcher) Close() error { return w.c.Close() }
