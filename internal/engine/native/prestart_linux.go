package native

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/linux/fds"
	"github.com/agentbox/agentbox/internal/linux/idmap"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/warmup"
)

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
	// staging is where a box of host root's was started from (nil otherwise): Start covers
	// its folders there.
	staging *idmap.Staging
}

var _ engine.Prestarted = (*Prestarted)(nil)

// Prestart starts box-init in the namespaces ns (names as in spec.Spec.Namespaces), with the
// calling user's uid and gid mapped to themselves, waiting for its request.
func Prestart(ns []string) (*Prestarted, error) {
	flags, err := boxCloneFlags(ns)
	if err != nil {
		return nil, fmt.Errorf("prestart: %w", err)
	}
	remap, err := idmap.Remap()
	if err != nil {
		return nil, fmt.Errorf("prestart: %w", err)
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
		// network namespace exactly when its spec asks for loopback: spec.Build).
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
	var staging *idmap.Staging
	if remap {
		// Started by host root, as start does: its folders are covered when its launch
		// arrives (Start), in the staging namespace whose mounts reach its own.
		lease, lerr := idmap.Take(os.Getpid())
		if lerr != nil {
			shimEnd.Close()
			return nil, fmt.Errorf("prestart: %w", lerr)
		}
		defer lease.Release() // box-init holds it once started
		box := lease.UID
		cmd.SysProcAttr.UidMappings, cmd.SysProcAttr.GidMappings = idmap.Maps(uid, box), idmap.Maps(gid, box)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		staging, err = idmap.Stage(box, cmd.Start)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		shimEnd.Close()
		return nil, fmt.Errorf("prestart box-init: %w", err)
	}
	return &Prestarted{cmd: cmd, pidfd: pidfd, ctl: shimEnd, ns: slices.Sorted(slices.Values(ns)), uid: uid, gid: gid, staging: staging}, nil
}

// Control is the shim's end of the box's control socket: after Start, the box's events arrive
// on it (it replaces the end of the pair a fresh Engine.Start would have used).
func (p *Prestarted) Control() *os.File { return p.ctl }

// Start hands the prestarted box-init the request req and the program's streams in io (its
// Control is not used: the box reports on Control()). It returns engine.ErrPrestartUnusable,
// and sends nothing, when req needs other namespaces or ids than the box has, or the box is
// gone.
func (p *Prestarted) Start(req []byte, io engine.IO) (*engine.Box, error) {
	s, err := spec.Parse(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	if s.UID != p.uid || s.GID != p.gid || !slices.Equal(slices.Sorted(slices.Values(s.Namespaces)), p.ns) {
		return nil, fmt.Errorf("%w: it has namespaces %v and ids %d:%d, the request needs %v and %d:%d",
			engine.ErrPrestartUnusable, p.ns, p.uid, p.gid, s.Namespaces, s.UID, s.GID)
	}
	if err := io.Check(s.Console); err != nil {
		return nil, err
	}
	if p.staging != nil {
		err := p.staging.Cover(s.OwnedPaths())
		p.staging.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
		}
	}
	specFile, err := fds.Sealed("agentbox-spec", req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	defer specFile.Close()
	pass := []int{int(specFile.Fd())}
	if io.Stdin != nil {
		pass = append(pass, int(io.Stdin.Fd()), int(io.Stdout.Fd()), int(io.Stderr.Fd()))
	}
	ev := engine.Event{Kind: engine.EventStart, Hold: io.Hold}
	if s.Console == plan.ConsoleTTY {
		ev.Rows, ev.Cols = io.Rows, io.Cols
	}
	if err := engine.SendEvent(p.ctl, ev, pass...); err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrPrestartUnusable, err)
	}
	return &engine.Box{Process: p.cmd.Process, PidFD: p.pidfd}, nil
}

// Discard ends an unused prestarted box-init and reaps it.
func (p *Prestarted) Discard() {
	p.staging.Close()
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
func receiveStart(ctl *os.File) (raw []byte, rows, cols uint16, hold bool, err error) {
	ev, got, err := engine.RecvEvent(ctl)
	if err != nil {
		return nil, 0, 0, false, err
	}
	defer closeFDsOf(got)
	if ev.Kind != engine.EventStart || (len(got) != 1 && len(got) != 4) {
		return nil, 0, 0, false, fmt.Errorf("waiting for the request: got %q with %d descriptors", ev.Kind, len(got))
	}
	if len(got) == 4 {
		for i, fd := range got[1:] {
			if err := unix.Dup3(fd, i, 0); err != nil {
				return nil, 0, 0, false, fmt.Errorf("stdio %d: %w", i, err)
			}
		}
	}
	raw, err = fds.ReadSpec(got[0])
	return raw, ev.Rows, ev.Cols, ev.Hold, err
}

// awaitGo is box-init's side of engine.IO.Hold: it waits for EventGo and returns the PTY size.
func awaitGo(ctl *os.File) (rows, cols uint16, err error) {
	ev, got, err := engine.RecvEvent(ctl)
	closeFDsOf(got)
	if err != nil {
		return 0, 0, err
	}
	if ev.Kind != engine.EventGo {
		return 0, 0, fmt.Errorf("waiting to start the program: got %q", ev.Kind)
	}
	return ev.Rows, ev.Cols, nil
}

func closeFDsOf(list []int) {
	for _, fd := range list {
		unix.Close(fd)
	}
}

// Prestart starts a box-init ahead of its request for the default box — the namespaces of a
// box under egress: deny (spec.DenyNamespaces), the calling user's ids — as a spare shim does
// (engine.Prestarter). It also warms up, in the calling process, the decoding of a spec, which
// Prestarted.Start does on the launch's path.
func (*Engine) Prestart() (engine.Prestarted, error) {
	p, err := Prestart(spec.DenyNamespaces())
	warmup.JSON(&spec.Spec{})
	if err != nil {
		return nil, err
	}
	return p, nil
}
