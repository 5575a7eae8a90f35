package shim_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/plan"
)

// fakeEngine starts a real box: the test binary re-executed as a small box-init ("fake-box-init")
// in new user and pid namespaces, which runs the program, reports on the control socket like the
// native engine's box-init, forwards signals to the program's process group and exits with its
// status. Only the filesystem, network and Landlock/seccomp parts of a real box are missing.
type fakeEngine struct{}

// fakeRequest is the fake engine's request (request.json).
type fakeRequest struct {
	Argv []string `json:"argv"`
	TTY  bool     `json:"tty,omitempty"`
	// Error, when set, is sent as an EventError instead of running the program.
	Error *engine.Event `json:"error,omitempty"`
	// Die, when non-zero, makes box-init exit with this status before the program runs,
	// without saying why.
	Die int `json:"die,omitempty"`
	// StartErr, when set, makes Engine.Start fail with the error class of this code.
	StartErr string `json:"startErr,omitempty"`
	// Linger, when set, makes box-init report the box's end once the program has exited
	// (engine.EventEnded, as the native engine's box-init does: its output closed, then the
	// event), then exit only once a file exists at this path, with status 99.
	Linger string `json:"linger,omitempty"`
}

func (fakeEngine) Name() string { return "fake" }

func (fakeEngine) Request(p *plan.Plan) ([]byte, error) {
	return json.Marshal(fakeRequest{Argv: append([]string{p.Program}, p.Args...), TTY: p.Console == plan.ConsoleTTY})
}

func (fakeEngine) Start(req []byte, io engine.IO) (*engine.Box, error) {
	var r fakeRequest
	if err := json.Unmarshal(req, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", engine.ErrBoxSetup, err)
	}
	if r.StartErr != "" {
		return nil, fmt.Errorf("%w: injected", engine.ErrorForCode(r.StartErr))
	}
	cmd := exec.Command("/proc/self/exe", "fake-box-init")
	cmd.Env = append(os.Environ(), "FAKE_BOX_REQUEST="+string(req), fmt.Sprintf("FAKE_BOX_SIZE=%d,%d", io.Rows, io.Cols))
	cmd.ExtraFiles = []*os.File{io.Control}
	if io.Stdin != nil {
		cmd.Stdin = io.Stdin
	}
	if io.Stdout != nil {
		cmd.Stdout = io.Stdout
	}
	if io.Stderr != nil {
		cmd.Stderr = io.Stderr
	}
	uid, gid := os.Getuid(), os.Getgid()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %v", engine.ErrBoxSetup, err)
	}
	return &engine.Box{Process: cmd.Process, PidFD: -1}, nil
}

func init() {
	engine.Register("fake", func() engine.Engine { return fakeEngine{} })
}

// fakeBoxInit is PID 1 of a fake box.
func fakeBoxInit() int {
	unix.CloseOnExec(3)
	ctl := os.NewFile(3, "control")
	var r fakeRequest
	if err := json.Unmarshal([]byte(os.Getenv("FAKE_BOX_REQUEST")), &r); err != nil {
		engine.SendEvent(ctl, engine.Event{Kind: engine.EventError, Code: engine.CodeBoxSetupFailed, Message: err.Error()})
		return 1
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	if r.Error != nil {
		engine.SendEvent(ctl, *r.Error)
		return 1
	}
	if r.Die != 0 {
		return r.Die
	}
	stdio := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	sys := &syscall.SysProcAttr{Setpgid: true}
	var slave *os.File
	if r.TTY {
		master, s, err := pty.Open()
		if err != nil {
			engine.SendEvent(ctl, engine.Event{Kind: engine.EventError, Code: engine.CodeBoxSetupFailed, Message: err.Error()})
			return 1
		}
		slave = s
		if rows, cols, ok := strings.Cut(os.Getenv("FAKE_BOX_SIZE"), ","); ok {
			r, _ := strconv.Atoi(rows)
			c, _ := strconv.Atoi(cols)
			if r > 0 && c > 0 {
				pty.Setsize(master, &pty.Winsize{Rows: uint16(r), Cols: uint16(c)})
			}
		}
		if err := engine.SendEvent(ctl, engine.Event{Kind: engine.EventPTY}, int(master.Fd())); err != nil {
			return 1
		}
		master.Close()
		stdio = []*os.File{slave, slave, slave}
		sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	path, err := exec.LookPath(r.Argv[0])
	if err != nil {
		code := engine.CodeProgramNotFound
		if errors.Is(err, os.ErrPermission) {
			code = engine.CodeProgramNotExec
		}
		engine.SendEvent(ctl, engine.Event{Kind: engine.EventError, Code: code, Message: err.Error()})
		return 1
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FAKE_BOX_") {
			env = append(env, kv)
		}
	}
	proc, err := os.StartProcess(path, r.Argv, &os.ProcAttr{Files: stdio, Sys: sys, Env: env})
	if err != nil {
		code := engine.CodeBoxSetupFailed
		if errors.Is(err, os.ErrPermission) {
			code = engine.CodeProgramNotExec
		}
		engine.SendEvent(ctl, engine.Event{Kind: engine.EventError, Code: code, Message: err.Error()})
		return 1
	}
	if slave != nil {
		slave.Close()
	}
	pid := proc.Pid
	if err := engine.SendEvent(ctl, engine.Event{Kind: engine.EventExec, Pid: pid}); err != nil {
		unix.Kill(-pid, unix.SIGKILL)
		return 1
	}
	go func() {
		for s := range sigs {
			unix.Kill(-pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 1
		}
		if got != pid {
			continue
		}
		code := ws.ExitStatus()
		if ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		if r.Linger == "" {
			return code
		}
		// As execstage.ReportEnded does, but for its look at the box's processes: this box
		// sees the host's /proc.
		if null, err := unix.Open("/dev/null", unix.O_RDWR, 0); err == nil {
			for fd := 0; fd <= 2; fd++ {
				unix.Dup3(null, fd, 0)
			}
			unix.Close(null)
		}
		engine.SendEvent(ctl, engine.Event{Kind: engine.EventEnded, Exit: code})
		ctl.Close()
		for i := 0; i < 6000; i++ {
			if _, err := os.Stat(r.Linger); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		return 99
	}
}

// heldEngine is an engine that holds (engine.Holder) and whose box is laid out as the bwrap
// engine's is: the top process (Box.Process) stays in the host's namespaces, and the box's PID 1
// (Box.InitPid) is another process, in new user and pid namespaces, that outlives the top
// process (it has no Pdeathsig): only the shim's settlement ends it. Neither runs a program;
// the box never reports on its control socket. Its request is "{}".
type heldEngine struct{}

func (heldEngine) Name() string     { return "held" }
func (heldEngine) HoldsStart() bool { return true }
func (heldEngine) Request(*plan.Plan) ([]byte, error) {
	return nil, errors.New("the held engine takes hand-written requests")
}

func (heldEngine) Start([]byte, engine.IO) (*engine.Box, error) {
	uid, gid := os.Getuid(), os.Getgid()
	init := exec.Command("/bin/sleep", "1000")
	init.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER | unix.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
	}
	if err := init.Start(); err != nil {
		return nil, fmt.Errorf("%w: %v", engine.ErrBoxSetup, err)
	}
	go init.Wait() // reaped once the settlement kills it
	top := exec.Command("/bin/sleep", "1000")
	top.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := top.Start(); err != nil {
		init.Process.Kill()
		return nil, fmt.Errorf("%w: %v", engine.ErrBoxSetup, err)
	}
	return &engine.Box{Process: top.Process, PidFD: -1, InitPid: init.Process.Pid}, nil
}

func init() {
	engine.Register("held", func() engine.Engine { return heldEngine{} })
}
