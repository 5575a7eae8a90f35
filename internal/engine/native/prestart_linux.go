package native

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/plan"
)

// ErrPrestartUnusable means a prestarted box-init cannot serve a request (other namespaces or
// ids, or it is gone): the caller discards it and starts the box the ordinary way.
var ErrPrestartUnusable = errors.New("prestarted box-init cannot serve this request")

// Prestarted is a box-init started ahead of its request, in new namespaces, waiting on its
// control socket for EventStart: the namespaces, the re-exec and Go's start-up of box-init cost
// no launch any time. It carries nothing of any launch until Start. Like Engine.Start, Prestart
// must be called on the thread that stays the box's parent (Pdeathsig is tied to it).
type Prestarted struct {
	cmd   *exec.Cmd
	pidfd int
	ctl   *os.File // the shim's end of the control socket
	ns    []string
	uid   int
	gid   int
}

// Prestart starts box-init in the namespaces ns (names as in Spec.Namespaces), with the calling
// user's uid and gid mapped to themselves, waiting for its request.
func Prestart(ns []string) (*Prestarted, error) {
	var flags uintptr
	for _, n := range ns {
		f, ok := cloneFlags[n]
		if !ok {
			return nil, fmt.Errorf("prestart: namespace %q: %w", n, ErrInvalidSpec)
		}
		flags |= f
	}
	if flags&unix.CLONE_NEWUSER == 0 || flags&unix.CLONE_NEWNS == 0 || flags&unix.CLONE_NEWPID == 0 {
		return nil, fmt.Errorf("prestart: user, mnt and pid namespaces are required: %w", ErrInvalidSpec)
	}
	shimEnd, boxEnd, err := engine.ControlPair()
	if err != nil {
		return nil, err
	}
	defer boxEnd.Close()
	uid, gid := os.Getuid(), os.Getgid()
	pidfd := -1
	args := []string{"agentbox", "box-init", "-wait"}
	if flags&unix.CLONE_NEWNET != 0 {
		// Its own network namespace: box-init brings lo up while it waits (a box has its own
		// network namespace exactly when its spec asks for loopback: buildSpec).
		args = append(args, "-loopback")
	}
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       args,
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: []*os.File{boxEnd},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 flags,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
			GidMappingsEnableSetgroups: false,
			AmbientCaps:                boxInitCaps,
			Pdeathsig:                  syscall.SIGKILL,
			PidFD:                      &pidfd,
		},
	}
	if err := cmd.Start(); err != nil {
		shimEnd.Close()
		return nil, fmt.Errorf("prestart box-init: %w", err)
	}
	return &Prestarted{cmd: cmd, pidfd: pidfd, ctl: shimEnd, ns: slices.Sorted(slices.Values(ns)), uid: uid, gid: gid}, nil
}

// Control is the shim's end of the box's control socket: after Start, the box's events arrive
// on it (it replaces the end of the pair a fresh Engine.Start would have used).
func (p *Prestarted) Control() *os.File { return p.ctl }

// Start hands the prestarted box-init the request req and the program's streams in io (its
// Control is not used: the box reports on Control()). It returns ErrPrestartUnusable, and
// sends nothing, when req needs other namespaces or ids than the box has, or the box is gone.
func (p *Prestarted) Start(req []byte, io engine.IO) (*engine.Box, error) {
	spec, err := ParseSpec(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	if spec.UID != p.uid || spec.GID != p.gid || !slices.Equal(slices.Sorted(slices.Values(spec.Namespaces)), p.ns) {
		return nil, fmt.Errorf("%w: it has namespaces %v and ids %d:%d, the request needs %v and %d:%d",
			ErrPrestartUnusable, p.ns, p.uid, p.gid, spec.Namespaces, spec.UID, spec.GID)
	}
	if spec.Console == plan.ConsolePipe && (io.Stdin == nil || io.Stdout == nil || io.Stderr == nil) {
		return nil, fmt.Errorf("%w: pipe console needs stdin, stdout and stderr", engine.ErrBoxSetup)
	}
	specFile, err := memfile("agentbox-spec", req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	defer specFile.Close()
	fds := []int{int(specFile.Fd())}
	if io.Stdin != nil {
		fds = append(fds, int(io.Stdin.Fd()), int(io.Stdout.Fd()), int(io.Stderr.Fd()))
	}
	ev := engine.Event{Kind: engine.EventStart, Hold: io.Hold}
	if spec.Console == plan.ConsoleTTY {
		ev.Rows, ev.Cols = io.Rows, io.Cols
	}
	if err := engine.SendEvent(p.ctl, ev, fds...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPrestartUnusable, err)
	}
	return &engine.Box{Process: p.cmd.Process, PidFD: p.pidfd}, nil
}

// Discard ends an unused prestarted box-init and reaps it.
func (p *Prestarted) Discard() {
	p.ctl.Close()
	p.cmd.Process.Kill()
	p.cmd.Wait()
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
	}
}

// receiveStart is box-init's side of Prestart: it waits for EventStart, puts the program's
// streams (pipe mode) on 0, 1 and 2, and returns the spec bytes, the PTY size and whether to
// hold (engine.IO.Hold).
func receiveStart(ctl *os.File) (spec []byte, rows, cols uint16, hold bool, err error) {
	ev, fds, err := engine.RecvEvent(ctl)
	if err != nil {
		return nil, 0, 0, false, err
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if ev.Kind != engine.EventStart || (len(fds) != 1 && len(fds) != 4) {
		return nil, 0, 0, false, fmt.Errorf("waiting for the request: got %q with %d descriptors", ev.Kind, len(fds))
	}
	if len(fds) == 4 {
		for i, fd := range fds[1:] {
			if err := unix.Dup3(fd, i, 0); err != nil {
				return nil, 0, 0, false, fmt.Errorf("stdio %d: %w", i, err)
			}
		}
	}
	spec, err = readSpecFD(fds[0])
	return spec, ev.Rows, ev.Cols, ev.Hold, err
}

// awaitGo is box-init's side of engine.IO.Hold: it waits for EventGo and returns the PTY size.
func awaitGo(ctl *os.File) (rows, cols uint16, err error) {
	ev, fds, err := engine.RecvEvent(ctl)
	closeFDsOf(fds)
	if err != nil {
		return 0, 0, err
	}
	if ev.Kind != engine.EventGo {
		return 0, 0, fmt.Errorf("waiting to start the program: got %q", ev.Kind)
	}
	return ev.Rows, ev.Cols, nil
}

func closeFDsOf(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
