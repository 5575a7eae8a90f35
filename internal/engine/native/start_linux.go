package native

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/linux/fds"
	"github.com/agentbox/agentbox/internal/linux/idmap"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/plan"
)

// Descriptors box-init receives beyond stdio.
const (
	fdControl = 3 // the control socket
	fdSpec    = 4 // a memfd holding the spec bytes
)

// boxInitCaps are the capabilities box-init needs in the box's user namespace: mounts and
// pivot_root (SYS_ADMIN), loopback (NET_ADMIN), dropping the bounding set in the exec stage
// (SETPCAP), the overlays of package caches (DAC_OVERRIDE: without it, creating an overlay
// in the box's user namespace fails with EACCES, measured on Linux 6.18), and the namespace's
// own inotify count in the exec stage (SYS_RESOURCE). In a user
// namespace they act only on what is mapped there (for an ordinary user, the user's own files).
// A non-root uid would lose them at execve without the ambient set; the program gets none.
var boxInitCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SYS_CHROOT, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE, unix.CAP_SYS_RESOURCE}

func start(req []byte, io engine.IO) (*engine.Box, error) {
	s, err := spec.Parse(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	if io.Control == nil {
		return nil, fmt.Errorf("%w: no control socket", engine.ErrBoxSetup)
	}
	if err := io.Check(s.Console); err != nil {
		return nil, err
	}
	flags, err := boxCloneFlags(s.Namespaces)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}

	specFile, err := fds.Sealed("agentbox-spec", req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	defer specFile.Close()

	args := []string{"box-init"}
	if s.Console == plan.ConsoleTTY && io.Rows > 0 && io.Cols > 0 {
		args = append(args, "-rows", strconv.Itoa(int(io.Rows)), "-cols", strconv.Itoa(int(io.Cols)))
	}
	if io.Hold {
		args = append(args, "-hold")
	}
	uids := []syscall.SysProcIDMap{{ContainerID: s.UID, HostID: os.Getuid(), Size: 1}}
	gids := []syscall.SysProcIDMap{{ContainerID: s.GID, HostID: os.Getgid(), Size: 1}}
	var cred *syscall.Credential
	remap, err := idmap.Remap()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	box := -1
	if remap {
		// Started by host root, the box runs as a host uid of its own (box), one no live
		// process holds: box-init becomes the box's uid inside, which is box on the host.
		lease, err := idmap.Take(os.Getpid())
		if err != nil {
			return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
		}
		defer lease.Release() // box-init holds it once started
		box = lease.UID
		uids, gids = idmap.Maps(s.UID, box), idmap.Maps(s.GID, box)
		cred = &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.GID), NoSetGroups: true}
	}
	pidfd := -1
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       append([]string{"agentbox"}, args...),
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: []*os.File{io.Control, specFile},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:                 flags,
			UidMappings:                uids,
			GidMappings:                gids,
			GidMappingsEnableSetgroups: false,
			Credential:                 cred,
			AmbientCaps:                boxInitCaps,
			// The shim is the box's parent for its whole life; if it dies, so does the box.
			Pdeathsig: syscall.SIGKILL,
			PidFD:     &pidfd,
		},
	}
	if s.Console == plan.ConsolePipe {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = io.Stdin, io.Stdout, io.Stderr
	}
	if remap {
		// What box-init binds as the box's own is idmapped to box, in a mount namespace that
		// only box-init gets.
		err = idmap.StartCovered(s.OwnedPaths(), box, cmd.Start)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: start box-init: %w", engine.ErrBoxSetup, err)
	}
	return &engine.Box{Process: cmd.Process, PidFD: pidfd}, nil
}

// boxCloneFlags returns the clone flags of a box's namespaces: user, mnt and pid are required.
func boxCloneFlags(names []string) (uintptr, error) {
	flags, err := ns.CloneFlags(names)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", spec.ErrInvalid, err)
	}
	if flags&unix.CLONE_NEWUSER == 0 || flags&unix.CLONE_NEWNS == 0 || flags&unix.CLONE_NEWPID == 0 {
		return 0, fmt.Errorf("%w: user, mnt and pid namespaces are required", spec.ErrInvalid)
	}
	return flags, nil
}
