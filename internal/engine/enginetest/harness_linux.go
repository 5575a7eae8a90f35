package enginetest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/plan"
)

// Dirs are the host directories of one test launch.
type Dirs struct {
	Workspace string // the workspace, bound read-write at its own path
	RunDir    string // bound read-only at /run/agentbox
}

// TestHome is the home directory of test plans: an empty tmpfs in the box, absent on the host.
const TestHome = "/home/agentbox-enginetest"

// NewPlan builds a plan that runs program with args in a fresh workspace and run dir; mod, if
// not nil, adjusts the input first.
func NewPlan(t testing.TB, program string, args []string, mod func(*plan.Input)) (*plan.Plan, Dirs) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	run, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := plan.Input{
		ID:        "0123456789abcdef0123456789abcdef",
		Program:   program,
		Args:      args,
		Workspace: ws,
		Home:      TestHome,
		UID:       os.Getuid(),
		GID:       os.Getgid(),
		Env:       []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "SECRET_TOKEN=must-not-leak"},
		RunDir:    run,
	}
	if mod != nil {
		mod(&in)
	}
	p, err := plan.Build(in)
	if err != nil {
		t.Fatalf("plan.Build: %v", err)
	}
	return p, Dirs{Workspace: ws, RunDir: run}
}

// Probe puts a copy of the running test binary into the workspace and returns its path, for
// plans whose program is the probe (argv: ProbeCommand, then a probe name).
func Probe(t testing.TB, d Dirs) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(d.Workspace, ".agentbox-probe")
	if err := os.Link(self, dst); err == nil {
		return dst
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// ProbePlan is NewPlan for the probe program running the named probe.
func ProbePlan(t testing.TB, probe string, mod func(*plan.Input)) (*plan.Plan, Dirs) {
	t.Helper()
	var d Dirs
	p, d := NewPlan(t, "/", nil, func(in *plan.Input) {
		d = Dirs{Workspace: in.Workspace, RunDir: in.RunDir}
		in.Program = Probe(t, d)
		in.Args = []string{ProbeCommand, probe}
		if mod != nil {
			mod(in)
		}
	})
	return p, d
}

// Options are how RunBox starts a box.
type Options struct {
	// Stdin is the program's input in pipe mode (then closed).
	Stdin []byte
	// StdinFile, if set, is the program's standard input in pipe mode instead of a pipe
	// carrying Stdin (RunBox closes it once the box has it).
	StdinFile *os.File
	// Rows and Cols are the PTY size in tty mode.
	Rows, Cols uint16
	// AfterExec, if set, runs once the program has been exec'd.
	AfterExec func(b *engine.Box)
	// AfterEnded, if set, runs when the box reports its end before its init's exit
	// (engine.EventEnded), before the next event is read.
	AfterEnded func(b *engine.Box, ev engine.Event)
}

// Result is what a box did, from the shim's side.
type Result struct {
	// Exit is the box's top process exit code, -1 if a signal ended it.
	Exit int
	// Events are the control events in order (a PTY event's fd is consumed).
	Events []engine.Event
	// Stdout and Stderr are the program's output; in tty mode Stdout is the PTY's output.
	Stdout, Stderr []byte
}

// Error returns the EventError, if the box reported one.
func (r Result) Error() *engine.Event {
	for _, ev := range r.Events {
		if ev.Kind == engine.EventError {
			return &ev
		}
	}
	return nil
}

// Execed reports whether the box reported EventExec.
func (r Result) Execed() bool {
	for _, ev := range r.Events {
		if ev.Kind == engine.EventExec {
			return true
		}
	}
	return false
}

// hangGuard bounds a box's life in tests, so that a broken box fails the test instead of
// hanging it. It is not a timing assertion: every box here finishes in milliseconds.
const hangGuard = 2 * time.Minute

// RunBox renders p with e, starts the box in this process (the test is the shim), runs it to
// its end and returns what happened.
func RunBox(t testing.TB, e engine.Engine, p *plan.Plan, o Options) Result {
	t.Helper()
	req, err := e.Request(p)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	shimEnd, boxEnd, err := engine.ControlPair()
	if err != nil {
		t.Fatal(err)
	}
	defer shimEnd.Close()
	io := engine.IO{Control: boxEnd, Rows: o.Rows, Cols: o.Cols}

	var wg sync.WaitGroup
	var stdout, stderr bytes.Buffer
	var inW *os.File
	if p.Console == plan.ConsolePipe {
		inR := o.StdinFile
		if inR == nil {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			inR, inW = r, w
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		io.Stdin, io.Stdout, io.Stderr = inR, outW, errW
		defer outR.Close()
		defer errR.Close()
		wg.Add(2)
		go func() { defer wg.Done(); stdout.ReadFrom(outR) }()
		go func() { defer wg.Done(); stderr.ReadFrom(errR) }()
	}
	box, err := e.Start(req, io)
	// The shim keeps only its own ends.
	boxEnd.Close()
	for _, f := range []*os.File{io.Stdin, io.Stdout, io.Stderr} {
		if f != nil {
			f.Close()
		}
	}
	if err != nil {
		if inW != nil {
			inW.Close()
		}
		t.Fatalf("Start: %v", err)
	}
	if inW != nil {
		go func() {
			inW.Write(o.Stdin)
			inW.Close()
		}()
	}

	guard := time.AfterFunc(hangGuard, func() {
		t.Errorf("box still running after %v: killing it", hangGuard)
		box.Process.Kill()
	})
	defer guard.Stop()

	var res Result
	for {
		ev, fds, err := engine.RecvEvent(shimEnd)
		if err != nil {
			if !errors.Is(err, engine.ErrControlClosed) {
				t.Logf("control channel: %v", err)
			}
			break
		}
		res.Events = append(res.Events, ev)
		switch ev.Kind {
		case engine.EventPTY:
			if len(fds) != 1 {
				t.Errorf("pty event carries %d fds, want 1", len(fds))
				for _, fd := range fds {
					syscall.Close(fd)
				}
				continue
			}
			master := os.NewFile(uintptr(fds[0]), "pty-master")
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer master.Close()
				// Reading ends with EIO once every slave is closed.
				stdout.ReadFrom(master)
			}()
		case engine.EventExec:
			if o.AfterExec != nil {
				o.AfterExec(box)
			}
		case engine.EventEnded:
			if o.AfterEnded != nil {
				o.AfterEnded(box, ev)
			}
			// box-init's inotify instances, handed over with the report as to the shim:
			// kept, every box of a test binary's would use up its user's instances.
			for _, fd := range fds {
				syscall.Close(fd)
			}
		default:
			for _, fd := range fds {
				syscall.Close(fd)
			}
		}
		if ev.Kind == engine.EventError {
			break
		}
	}
	st, err := box.Process.Wait()
	if err != nil {
		t.Fatalf("wait for box: %v", err)
	}
	if box.PidFD >= 0 {
		syscall.Close(box.PidFD)
	}
	res.Exit = st.ExitCode()
	wg.Wait()
	res.Stdout, res.Stderr = stdout.Bytes(), stderr.Bytes()
	return res
}

// mustExec fails the test unless the box exec'd its program.
func mustExec(t testing.TB, r Result) {
	t.Helper()
	if ev := r.Error(); ev != nil {
		t.Fatalf("box reported %s: %s", ev.Code, ev.Message)
	}
	if !r.Execed() {
		t.Fatalf("box never reported exec (exit %d, stderr %q)", r.Exit, r.Stderr)
	}
}
