package native

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/plan"
)

// Descriptors box-init and box-exec receive beyond stdio.
const (
	fdControl = 3 // box-init: the control socket
	fdSpec    = 4 // box-init: a memfd holding the spec bytes
	fdExec    = 3 // box-exec: its end of the exec socket
)

// boxInitCaps are the capabilities box-init needs in the box's user namespace: mounts and
// pivot_root (SYS_ADMIN), loopback (NET_ADMIN), and dropping the bounding set in the exec stage
// (SETPCAP). A non-root uid would lose them at execve without the ambient set.
var boxInitCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SYS_CHROOT, unix.CAP_SETPCAP}

var cloneFlags = map[string]uintptr{
	"user":   unix.CLONE_NEWUSER,
	"mnt":    unix.CLONE_NEWNS,
	"pid":    unix.CLONE_NEWPID,
	"net":    unix.CLONE_NEWNET,
	"ipc":    unix.CLONE_NEWIPC,
	"uts":    unix.CLONE_NEWUTS,
	"cgroup": unix.CLONE_NEWCGROUP,
}

func start(req []byte, io engine.IO) (*engine.Box, error) {
	spec, err := ParseSpec(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	if io.Control == nil {
		return nil, fmt.Errorf("%w: no control socket", engine.ErrBoxSetup)
	}
	if spec.Console == plan.ConsolePipe && (io.Stdin == nil || io.Stdout == nil || io.Stderr == nil) {
		return nil, fmt.Errorf("%w: pipe console needs stdin, stdout and stderr", engine.ErrBoxSetup)
	}
	var flags uintptr
	for _, n := range spec.Namespaces {
		f, ok := cloneFlags[n]
		if !ok {
			return nil, fmt.Errorf("%w: %w: namespace %q", engine.ErrBoxSetup, ErrInvalidSpec, n)
		}
		flags |= f
	}
	if flags&unix.CLONE_NEWUSER == 0 || flags&unix.CLONE_NEWNS == 0 || flags&unix.CLONE_NEWPID == 0 {
		return nil, fmt.Errorf("%w: %w: user, mnt and pid namespaces are required", engine.ErrBoxSetup, ErrInvalidSpec)
	}

	specFile, err := memfile("agentbox-spec", req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	defer specFile.Close()

	args := []string{"box-init"}
	if spec.Console == plan.ConsoleTTY && io.Rows > 0 && io.Cols > 0 {
		args = append(args, "-rows", strconv.Itoa(int(io.Rows)), "-cols", strconv.Itoa(int(io.Cols)))
	}
	if io.Hold {
		args = append(args, "-hold")
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
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: spec.UID, HostID: os.Getuid(), Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: spec.GID, HostID: os.Getgid(), Size: 1}},
			GidMappingsEnableSetgroups: false,
			AmbientCaps:                boxInitCaps,
			// The shim is the box's parent for its whole life; if it dies, so does the box.
			Pdeathsig: syscall.SIGKILL,
			PidFD:     &pidfd,
		},
	}
	if spec.Console == plan.ConsolePipe {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = io.Stdin, io.Stdout, io.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start box-init: %w", engine.ErrBoxSetup, err)
	}
	return &engine.Box{Process: cmd.Process, PidFD: pidfd}, nil
}

// memfile returns a sealed memfd holding b.
func memfile(name string, b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd for %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal %s: %w", name, err)
	}
	return f, nil
}

// readSpecFD reads the spec from the memfd at fd (from offset 0, whatever the shared offset).
func readSpecFD(fd int) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	if st.Size <= 0 || st.Size > 16<<20 {
		return nil, fmt.Errorf("read spec: size %d", st.Size)
	}
	b := make([]byte, st.Size)
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil {
			return nil, fmt.Errorf("read spec: %w", err)
		}
		if n == 0 {
			return nil, fmt.Errorf("read spec: short read")
		}
		off += n
	}
	return b, nil
}
