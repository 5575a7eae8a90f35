package bwrap

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
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
	"github.com/agentbox/agentbox/internal/linux/idmap"
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
	boxUID := fs.Int("box-uid", -1, "run bwrap as this host uid and gid (a box started by host root: idmap.BoxUID)")
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
	if *boxUID >= 0 {
		// bwrap runs as the box's uid, which cannot pass host root's folders on the way to a
		// bind source (/root, the runtime directory): every source of the box's own is opened
		// here and bound from its descriptor.
		if args2, err = openSources(args2, open); err != nil {
			return fail("%v", err)
		}
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
	if *boxUID < 0 && os.Geteuid() != 0 && supportsUserns(*bwrapPath) {
		// An ordinary user's box: its user namespace is made here and joined by bwrap
		// (--userns), not made by bwrap, which would nest the box in a second one to map the
		// user back after mounting /dev/pts as root, where bwrap-init could not write the box's
		// inotify counts (docs/security.md, "inotify instances and watches").
		ns, err := idmap.OwnNamespace()
		if err != nil {
			return fail("%v", err)
		}
		defer ns.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, ns)
		cmd.Args = joinUserns(cmd.Args, 2+len(cmd.ExtraFiles))
	}
	if *boxUID >= 0 {
		// No supplementary group of root's either.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(*boxUID), Gid: uint32(*boxUID), Groups: []uint32{}}
		// bwrap itself may lie where the box's uid cannot reach it (a folder of root's on
		// PATH): it is opened here and run from its descriptor, the last one bwrap inherits
		// (bwrap-init closes what it does not keep).
		prog, err := os.Open(*bwrapPath)
		if err != nil {
			return fail("open bwrap: %v", err)
		}
		defer prog.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, prog)
		cmd.Path = "/proc/self/fd/" + strconv.Itoa(2+len(cmd.ExtraFiles))
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

// openSources replaces the source of each bind in args (bwrap's argv, before "--") that is not
// a system folder's and not already a descriptor with the path open gives it (a descriptor
// opened here); an absent source of a "-try" bind drops the bind, as bwrap would.
func openSources(args []string, open func(source, beneath string) (string, error)) ([]string, error) {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		op := strings.TrimSuffix(a, "-try")
		if (op != "--bind" && op != "--ro-bind" && op != "--dev-bind") || i+2 >= len(args) {
			out = append(out, a)
			continue
		}
		src, dst := args[i+1], args[i+2]
		i += 2
		if spec.IsSystem(src) || strings.HasPrefix(src, "/proc/self/fd/") {
			out = append(out, a, src, dst)
			continue
		}
		p, err := open(src, "")
		if err != nil {
			if op != a && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("bind %s: %w", src, err)
		}
		out = append(out, op, p, dst)
	}
	return out, nil
}

// joinUserns returns bwrap's argv with its --unshare-user replaced by --userns fd.
func joinUserns(argv []string, fd int) []string {
	out := make([]string, 0, len(argv)+1)
	for _, a := range argv {
		if a == "--unshare-user" {
			out = append(out, "--userns", strconv.Itoa(fd))
			continue
		}
		out = append(out, a)
	}
	return out
}

// supportsUserns reports whether the bwrap at path takes --userns (bubblewrap 0.5.0 and
// later): older ones make the box's user namespace themselves.
func supportsUserns(path string) bool {
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return false
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "bubblewrap ")
	if !ok {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 0 || minor >= 5
}
