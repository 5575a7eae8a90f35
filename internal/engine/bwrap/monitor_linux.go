package bwrap

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/execstage"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/linux/fds"
	"github.com/agentbox/agentbox/internal/linux/mount"
)

// Descriptors the monitor receives from Start beyond stdio.
const (
	monControl = 3 // the control socket
	monRequest = 4 // memfd with the request
	monReport  = 5 // pipe to Start: "pid N" or "error: …"
)

// captureMax bounds what the monitor keeps of bwrap's own error output.
const captureMax = 16 << 10

// MonitorMain is the entry point of `agentbox bwrap-monitor -bwrap PATH [-rows N -cols M]`, the
// box's top process: it runs bwrap with the request's argv, reports bwrap-init's host pid to
// Start, relays signals to bwrap-init, reports a bwrap failure on the control channel, and exits
// with bwrap's status (the program's, or 128+n).
func MonitorMain(args []string) int {
	fs := flag.NewFlagSet("bwrap-monitor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bwrapPath := fs.String("bwrap", "", "path of bwrap")
	rows := fs.Uint("rows", 0, "initial PTY rows")
	cols := fs.Uint("cols", 0, "initial PTY columns")
	report := os.NewFile(monReport, "report")
	ctl := os.NewFile(monControl, "control")
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		if report != nil {
			fmt.Fprintf(report, "error: %s\n", strings.ReplaceAll(msg, "\n", " "))
			report.Close()
		}
		engine.SendEvent(ctl, engine.Event{Kind: engine.EventError, Code: engine.CodeBoxSetupFailed, Message: msg})
		return 1
	}
	if err := fs.Parse(args); err != nil || *bwrapPath == "" || fs.NArg() != 0 {
		return fail("bwrap-monitor: bad arguments %q", args)
	}
	for _, fd := range []int{monControl, monRequest, monReport} {
		unix.CloseOnExec(fd)
	}
	raw, err := fds.ReadSpec(monRequest)
	if err != nil {
		return fail("bwrap request: %v", err)
	}
	unix.Close(monRequest)
	r, err := ParseRequest(raw)
	if err != nil {
		return fail("%v", err)
	}
	specBytes, err := json.Marshal(r.Spec)
	if err != nil {
		return fail("%v", err)
	}
	specFile, err := fds.Sealed("agentbox-spec", specBytes)
	if err != nil {
		return fail("%v", err)
	}
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return fail("open agentbox executable: %v", err)
	}
	captureR, captureW, err := os.Pipe()
	if err != nil {
		return fail("%v", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return fail("%v", err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fail("%v", err)
	}
	// Descriptors of beneath-resolved bind sources follow fdReady in bwrap's table.
	var sources []*os.File
	defer func() {
		for _, f := range sources {
			f.Close()
		}
	}()
	open := func(src, beneath string) (string, error) {
		fd, err := mount.OpenSource(src, beneath)
		if err != nil {
			return "", err
		}
		sources = append(sources, os.NewFile(uintptr(fd), src))
		return "/proc/self/fd/" + strconv.Itoa(fdReady+len(sources)), nil
	}
	args2, err := ExpandArgs(r.Args, hostStat, open)
	if err != nil {
		return fail("%v", err)
	}
	argv := append([]string{"bwrap"}, args2...)
	if *rows > 0 && *cols > 0 {
		argv = append(argv, "-rows", strconv.Itoa(int(*rows)), "-cols", strconv.Itoa(int(*cols)))
	}
	// What bwrap-init needs of the host to keep the box's protected paths (it sees neither the
	// staged copies' folders nor the proposed changes' store) follows the bind sources.
	protect, err := protectFiles(r.Spec)
	defer func() {
		for _, f := range protect {
			f.Close()
		}
	}()
	if err != nil {
		return fail("%v", err)
	}
	if keeps(r.Spec) {
		argv = append(argv, "-protect-fd", strconv.Itoa(fdReady+len(sources)+1), "-protect-n", strconv.Itoa(len(protect)))
	}
	cmd := &exec.Cmd{
		Path: *bwrapPath,
		Args: argv,
		Env:  []string{},
		Dir:  "/",
		// Indexes are fd-3: fdControl … fdReady.
		ExtraFiles:  append(append([]*os.File{ctl, specFile, os.Stderr, exe, statusW, readyW}, sources...), protect...),
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      captureW,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	// Signals that arrive before bwrap-init exists are held and relayed once it does.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, execstage.ForwardedSignals()...)
	err = cmd.Start()
	for _, f := range []*os.File{specFile, exe, captureW, statusW, readyW} {
		f.Close()
	}
	if err != nil {
		return fail("start bwrap: %v", err)
	}

	var captured strings.Builder
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(&limitWriter{&captured, captureMax}, captureR)
	}()
	ready := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, _ := readyR.Read(b[:])
		ready <- n == 1
	}()
	pidc := make(chan int, 1)
	go func() {
		pidc <- childPid(statusR)
		io.Copy(io.Discard, statusR)
	}()
	// bwrap names its child (bwrap-init) as soon as it exists, but an unprivileged bwrap moves
	// it into a second user namespace while it sets up; Start learns the pid only once
	// bwrap-init runs, so that the namespaces the shim records are the box's final ones.
	initPid := <-pidc
	took := false
	if initPid > 0 {
		took = <-ready
	}
	if took {
		fmt.Fprintf(report, "pid %d\n", initPid)
		go relaySignals(sigs, initPid)
	} else {
		fmt.Fprintf(report, "error: %v\n", errNoChild)
	}
	report.Close()
	report = nil

	werr := cmd.Wait()
	wg.Wait()
	code := 0
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		code = ws.ExitStatus()
		if ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	default:
		code = 1
	}
	readyR.Close()
	if initPid <= 0 {
		took = <-ready
	}
	if !took {
		// bwrap failed before bwrap-init took over reporting: say why, once.
		msg := strings.TrimSpace(captured.String())
		if msg == "" {
			msg = fmt.Sprintf("bwrap exited with status %d before the box started", code)
		}
		engine.SendEvent(ctl, engine.Event{Kind: engine.EventError, Code: engine.CodeBoxSetupFailed, Message: msg})
		if code == 0 {
			code = 1
		}
	}
	return code
}

// childPid reads bwrap's JSON status lines until the one naming the box's PID 1 (host pid),
// or returns 0 when bwrap ends first.
func childPid(r io.Reader) int {
	dec := json.NewDecoder(bufio.NewReader(r))
	for {
		var st struct {
			ChildPid int `json:"child-pid"`
		}
		if err := dec.Decode(&st); err != nil {
			return 0
		}
		if st.ChildPid > 0 {
			return st.ChildPid
		}
	}
}

// relaySignals sends the monitor's signals to bwrap-init, which forwards them to the program.
// A pidfd pins the process, so a reused pid is never signalled.
func relaySignals(sigs <-chan os.Signal, pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	for s := range sigs {
		if err := unix.PidfdSendSignal(fd, s.(syscall.Signal), nil, 0); errors.Is(err, unix.ESRCH) {
			return
		}
	}
}

// keeps reports whether bwrap-init keeps anything of s for the box's life (a workspace bind, a
// mask outside /proc, a staged copy, a guarded path): then it builds the box's filesystem
// further, in a mount namespace of its own (protectMounts).
func keeps(s *spec.Spec) bool {
	if len(s.Guards) > 0 || s.ChangesDir != "" {
		return true
	}
	for _, m := range s.Mounts {
		switch {
		case m.Kind == spec.KindBind && (m.Staged || m.Beneath != ""):
			return true
		case m.Kind == spec.KindMask && m.Target != "/proc" && !strings.HasPrefix(m.Target, "/proc/"):
			return true
		}
	}
	return false
}

// protectFiles opens on the host what bwrap-init needs to keep s's protected paths and cannot
// reach from the box: the proposed changes' store (made when missing), when s has one, then
// each staged copy (read-write) and its folder, in the order of s's mounts.
func protectFiles(s *spec.Spec) ([]*os.File, error) {
	var out []*os.File
	openDir := func(dir string) error {
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		out = append(out, os.NewFile(uintptr(fd), dir))
		return nil
	}
	if s.ChangesDir != "" {
		if err := os.MkdirAll(s.ChangesDir, 0o700); err != nil {
			return out, fmt.Errorf("proposed changes: %w", err)
		}
		if err := openDir(s.ChangesDir); err != nil {
			return out, fmt.Errorf("proposed changes %s: %w", s.ChangesDir, err)
		}
	}
	for _, m := range s.Mounts {
		if m.Kind != spec.KindBind || !m.Staged {
			continue
		}
		f, err := os.OpenFile(m.Source, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return out, fmt.Errorf("open staged copy %s: %w", m.Source, err)
		}
		out = append(out, f)
		if err := openDir(filepath.Dir(m.Source)); err != nil {
			return out, fmt.Errorf("open staged copy folder %s: %w", filepath.Dir(m.Source), err)
		}
	}
	return out, nil
}

// hostStat reports whether path exists on the host and is a directory.
func hostStat(path string) (isDir, ok bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return false, false
	}
	return fi.IsDir(), true
}

type limitWriter struct {
	w *strings.Builder
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if rest := l.n - l.w.Len(); rest > 0 {
		l.w.Write(p[:min(len(p), rest)])
	}
	return len(p), nil
}
