package bwrap

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/hostprog"
	"github.com/agentbox/agentbox/internal/linux/fds"
	"github.com/agentbox/agentbox/internal/linux/idmap"
	"github.com/agentbox/agentbox/internal/plan"
)

// startTimeout bounds how long Start waits for bwrap to create the box. It guards against a
// wedged bwrap; boxes are created in milliseconds.
const startTimeout = 30 * time.Second

// Start starts the box described by req as a child of the calling process (the shim): the
// monitor, which runs bwrap. It returns once bwrap has created the box (Box.InitPid is its PID
// 1) or has failed (Box.InitPid is 0 and the monitor reports the failure on the control
// channel). A missing bwrap is ErrMissing.
func (e *Engine) Start(req []byte, io engine.IO) (*engine.Box, error) {
	r, err := ParseRequest(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	if io.Control == nil {
		return nil, fmt.Errorf("%w: no control socket", engine.ErrBoxSetup)
	}
	if err := io.Check(r.Spec.Console); err != nil {
		return nil, err
	}
	path, err := hostprog.Path(Program)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrMissing, err)
	}
	reqFile, err := fds.Sealed("agentbox-bwrap-request", req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	defer reqFile.Close()
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	defer reportR.Close()

	args := []string{"agentbox", "bwrap-monitor", "-bwrap", path}
	if r.Spec.Console == plan.ConsoleTTY && io.Rows > 0 && io.Cols > 0 {
		args = append(args, "-rows", strconv.Itoa(int(io.Rows)), "-cols", strconv.Itoa(int(io.Cols)))
	}
	remap, err := idmap.Remap()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
	}
	boxUID := -1
	if remap {
		// Started by host root, bwrap runs as the box's own host uid, as it would for an
		// ordinary user (MonitorMain): one no live process holds, taken until bwrap runs as it.
		lease, err := idmap.Take(os.Getpid())
		if err != nil {
			return nil, fmt.Errorf("%w: %w", engine.ErrBoxSetup, err)
		}
		defer lease.Release()
		boxUID = lease.UID
		args = append(args, "-box-uid", strconv.Itoa(boxUID))
	}
	pidfd := -1
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       args,
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: []*os.File{io.Control, reqFile, reportW},
		SysProcAttr: &syscall.SysProcAttr{
			// The shim is the box's parent for its whole life; if it dies, so does the box.
			Pdeathsig: syscall.SIGKILL,
			PidFD:     &pidfd,
		},
	}
	if r.Spec.Console == plan.ConsolePipe {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = io.Stdin, io.Stdout, io.Stderr
	}
	if remap && r.Spec.ChangesDir != "" {
		// The monitor makes the proposed changes' folder (protectFiles), as host root, whose
		// files the covered folders cannot hold (root is not in their idmapping): made here.
		if err := os.MkdirAll(r.Spec.ChangesDir, 0o700); err != nil {
			return nil, fmt.Errorf("%w: proposed changes: %w", engine.ErrBoxSetup, err)
		}
	}
	if remap {
		// What the box binds as its own is idmapped to its uid, in a mount namespace that only
		// the monitor (and so bwrap) gets.
		err = idmap.StartCovered(r.Spec.OwnedPaths(), boxUID, cmd.Start)
	} else {
		err = cmd.Start()
	}
	reportW.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: start bwrap monitor: %w", engine.ErrBoxSetup, err)
	}
	box := &engine.Box{Process: cmd.Process, PidFD: pidfd}
	line, err := readReport(reportR)
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("%w: bwrap monitor: %w", engine.ErrBoxSetup, err)
	}
	if v, ok := strings.CutPrefix(line, "pid "); ok {
		if box.InitPid, err = strconv.Atoi(v); err != nil || box.InitPid <= 0 {
			cmd.Process.Kill()
			return nil, fmt.Errorf("%w: bwrap monitor reported %q", engine.ErrBoxSetup, line)
		}
	}
	// Otherwise bwrap failed before creating the box: the monitor reports why on the control
	// channel and exits, as box-init does when it cannot build a box.
	return box, nil
}

// readReport reads the monitor's one-line report, bounded by startTimeout.
func readReport(r *os.File) (string, error) {
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
		ch <- res{strings.TrimSuffix(line, "\n"), err}
	}()
	select {
	case x := <-ch:
		if x.err != nil && x.line == "" {
			return "", fmt.Errorf("exited without reporting: %w", x.err)
		}
		return x.line, nil
	case <-time.After(startTimeout):
		r.Close()
		return "", fmt.Errorf("no report within %v", startTimeout)
	}
}
