package shim_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/linux/proc"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/shim"
	"github.com/agentbox/agentbox/internal/testenv"
)

// nativeLaunch starts a shim whose box is a real native-engine box running program with args.
func nativeLaunch(t *testing.T, cfg shim.Config, program string, args []string, mod func(*plan.Input)) (string, enginetest.Dirs) {
	t.Helper()
	p, d := enginetest.NewPlan(t, program, args, mod)
	req, err := (&native.Engine{}).Request(p)
	if err != nil {
		t.Fatalf("native request: %v", err)
	}
	cfg.Engine = native.Name
	cfg.Console = p.Console
	return launchRaw(t, t.TempDir(), cfg, req), d
}

// requireNative skips when this host cannot build a native box (for a reason the native
// engine's own tests report), by running one trivial box through the shim.
func requireNative(t *testing.T) {
	t.Helper()
	dir, _ := nativeLaunch(t, shim.Config{}, "/bin/sh", []string{"-c", "exit 0"}, nil)
	r := attachPipes(t, dir, nil)
	var se *console.StartError
	if errors.As(r.err, &se) && se.Code == engine.CodeBoxSetupFailed {
		testenv.NoBoxes(t, "native boxes unavailable here: %v", r.err)
	}
	if r.err != nil || r.code != 0 {
		t.Fatalf("trivial native box: %d, %v", r.code, r.err)
	}
}

func TestNativeEngine(t *testing.T) {
	requireNative(t)

	t.Run("pipe", func(t *testing.T) {
		// The program leaves a grandchild in a session of its own, which only box-init's kill
		// at the end reaches: box-init reports the box's end (EventEnded) once nothing else is
		// left in its pid namespace, and the shim settles without scanning /proc; it exits once
		// it has reaped box-init, so nothing of the namespace may remain then.
		dir, _ := nativeLaunch(t, shim.Config{}, "/bin/sh", []string{"-c", `wc -c; setsid sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 &'; echo to-stderr >&2; exit 7`}, nil)
		r := attachPipes(t, dir, []byte("12345"))
		if r.err != nil || r.code != 7 {
			t.Fatalf("Attach = %d, %v (stderr %q)", r.code, r.err, r.stderr)
		}
		if strings.TrimSpace(string(r.stdout)) != "5" || string(r.stderr) != "to-stderr\n" {
			t.Fatalf("stdout %q, stderr %q", r.stdout, r.stderr)
		}
		st := waitStatus(t, dir)
		if st.State != api.StateExited || !st.Settled || !st.Execd || st.Namespaces["pid"] == nsIno(t, "pid") || st.Namespaces["user"] == nsIno(t, "user") {
			t.Fatalf("status %+v", st)
		}
		if !proc.WaitEnded(st.ShimPid, failTimeout) {
			t.Fatalf("the shim has not exited %v after the launch's end", failTimeout)
		}
		if log, _ := os.ReadFile(filepath.Join(dir, launchdir.ShimLogFile)); !strings.Contains(string(log), "box ended (exit 7)") {
			t.Errorf("box-init did not report the box's end before its exit (shim.log:\n%s)", log)
		}
		if left, err := ns.Remaining(st.Namespaces["pid"]); err != nil || len(left) > 0 {
			t.Errorf("settled, but processes of the box's pid namespace remain: %v %v", left, err)
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	t.Run("exit codes are the program's", func(t *testing.T) {
		for _, code := range []string{"125", "126", "127"} {
			dir, _ := nativeLaunch(t, shim.Config{}, "/bin/sh", []string{"-c", "exit " + code}, nil)
			r := attachPipes(t, dir, nil)
			if r.err != nil || strconv.Itoa(r.code) != code {
				t.Fatalf("exit %s: Attach = %d, %v", code, r.code, r.err)
			}
		}
	})

	t.Run("program not found", func(t *testing.T) {
		dir, _ := nativeLaunch(t, shim.Config{}, "/usr/bin/no-such-program-agentbox", nil, nil)
		r := attachPipes(t, dir, nil)
		if !errors.Is(r.err, engine.ErrProgramNotFound) {
			t.Fatalf("Attach = %d, %v; want program_not_found", r.code, r.err)
		}
		if st := waitStatus(t, dir); st.State != api.StateFailed || st.Error == nil || st.Error.Code != engine.CodeProgramNotFound {
			t.Fatalf("status %+v", st)
		}
	})

	t.Run("tty", func(t *testing.T) {
		um, us, err := pty.Open()
		if err != nil {
			t.Skipf("no pty: %v", err)
		}
		defer um.Close()
		defer us.Close()
		pty.Setsize(um, &pty.Winsize{Rows: 33, Cols: 111})
		out := readPTY(um)
		dir, _ := nativeLaunch(t, shim.Config{}, "/bin/sh", []string{"-c", `echo "size $(stty size)"; printf 'a\033]52;c;QUFB\007b\n'; exit 3`},
			func(in *plan.Input) { in.Console = plan.ConsoleTTY })
		code, err := console.Attach(sock(dir), us, us, us, console.AttachOptions{NoSignals: true})
		if err != nil || code != 3 {
			t.Fatalf("Attach = %d, %v", code, err)
		}
		waitFor(t, "output", func() bool { return strings.Contains(out.String(), "ab") }, nil)
		if o := out.String(); !strings.Contains(o, "size 33 111") || strings.Contains(o, "52;") {
			t.Fatalf("terminal got %q", o)
		}
	})

	t.Run("hangup on client loss", func(t *testing.T) {
		dir, _ := nativeLaunch(t, shim.Config{}, "/bin/sh", []string{"-c", hangupScript, "/tmp/m"}, nil)
		c := rawAttach(t, dir)
		c.readUntil("ready")
		c.c.Close()
		st := waitStatus(t, dir)
		if st.ExitCode == nil || *st.ExitCode != 9 || !st.Settled {
			t.Fatalf("status %+v, want exit 9 from the HUP trap", st)
		}
	})

	t.Run("stop", func(t *testing.T) {
		dir, _ := nativeLaunch(t, shim.Config{StopGrace: time.Hour}, "/bin/sh", []string{"-c", `trap 'exit 5' TERM; echo ready; while :; do sleep 0.05; done`}, nil)
		c := rawAttach(t, dir)
		c.readUntil("ready")
		waitRunning(t, dir)
		w, err := shim.Watch(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		w.Stop()
		last := drain(t, w)
		if last.Kind != shim.EventExit || last.Status.ExitCode == nil || *last.Status.ExitCode != 5 || !last.Status.Settled {
			t.Fatalf("last event %+v", last)
		}
	})

	t.Run("detached", func(t *testing.T) {
		dir, _ := nativeLaunch(t, shim.Config{Detached: true}, "/bin/sh", []string{"-c", `echo out; echo err >&2; exit 4`}, nil)
		if st := waitStatus(t, dir); st.ExitCode == nil || *st.ExitCode != 4 {
			t.Fatalf("status %+v", st)
		}
		b, _ := os.ReadFile(filepath.Join(dir, launchdir.OutputFile))
		if string(b) != "out\nerr\n" {
			t.Fatalf("output.log %q", b)
		}
	})
}

// childWithArgs returns the pid of a child of parent whose command line is args, 0 if none.
func childWithArgs(parent int, args ...string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.TrimSuffix(string(cmd), "\x00") == strings.Join(args, "\x00") {
			return pid
		}
	}
	return 0
}

// TestSpareShim: a spare shim starts the default box's box-init ahead; a launch handed to it
// runs in that very box-init (egress deny), while a launch that needs other namespaces (egress
// allow) gets a box-init of its own and the prestarted one is discarded.
func TestSpareShim(t *testing.T) {
	requireNative(t)
	for _, tc := range []struct {
		name   string
		egress plan.Egress
		used   bool
	}{
		{"egress deny uses the prestarted box-init", plan.EgressDeny, true},
		{"egress allow starts its own", plan.EgressAllow, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := shim.StartSpare()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sp.Close() })
			pre := prestartedBoxInit(t, sp)
			p, _ := enginetest.NewPlan(t, "/bin/sh", []string{"-c", "cat; exit 4"}, func(in *plan.Input) { in.Egress = tc.egress })
			dir := handToSpare(t, sp, p)
			r := attachPipes(t, dir, []byte("through the spare"))
			if r.err != nil || r.code != 4 || string(r.stdout) != "through the spare" {
				t.Fatalf("Attach = %d, %v, stdout %q, stderr %q", r.code, r.err, r.stdout, r.stderr)
			}
			st := waitStatus(t, dir)
			if !st.Execd || !st.Settled {
				t.Fatalf("status %+v", st)
			}
			log, _ := os.ReadFile(filepath.Join(dir, launchdir.ShimLogFile))
			if tc.used {
				if st.BoxPid != pre {
					t.Errorf("box pid %d, want the prestarted box-init %d\n%s", st.BoxPid, pre, log)
				}
			} else {
				if st.BoxPid == pre || !strings.Contains(string(log), "prestarted box-init not used") {
					t.Errorf("box pid %d (prestarted %d): the prestarted box-init served a request it does not fit\n%s", st.BoxPid, pre, log)
				}
				if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pre))); err == nil {
					if b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pre), "stat")); !strings.Contains(string(b), ") Z ") {
						t.Errorf("the discarded box-init %d still runs", pre)
					}
				}
			}
		})
	}
}

// TestSpareShimLoopback: the spare's box-init, prestarted in its own network namespace, brings
// lo up while it waits; the program sees lo up and nothing else. A signal sent to that
// box-init before it had a launch does not reach the program (SIGUSR1 would kill it).
func TestSpareShimLoopback(t *testing.T) {
	requireNative(t)
	sp, pre := startSpare(t)
	// It brings lo up while it waits, before any launch (and after it subscribed to the
	// signals it forwards): its network namespace gets its local routes. Then a signal is
	// sent to it before it has a launch.
	waitFor(t, "the prestarted box-init to bring lo up while it waits", func() bool {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pre), "net", "fib_trie"))
		return strings.Contains(string(b), "127.0.0.1")
	}, nil)
	if err := syscall.Kill(pre, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	p, _ := enginetest.ProbePlan(t, "interfaces", nil)
	dir := handToSpare(t, sp, p)
	r := attachPipes(t, dir, nil)
	if st := waitStatus(t, dir); st.BoxPid != pre {
		t.Fatalf("box pid %d, want the prestarted box-init %d", st.BoxPid, pre)
	}
	if r.err != nil || r.code != 0 || string(r.stdout) != "lo up\n" {
		t.Fatalf("interfaces probe: exit %d, %v, stdout %q, stderr %q; want only lo, up", r.code, r.err, r.stdout, r.stderr)
	}
}

// TestSpareShimForwardsSignals: a launch run by a spare's prestarted box-init gets the signals
// the shim sends its box, SIGWINCH included (box-init subscribed to them before it warmed up,
// which subscribes to SIGWINCH for a moment itself).
func TestSpareShimForwardsSignals(t *testing.T) {
	requireNative(t)
	sp, pre := startSpare(t)
	script := `trap 'echo got-winch; exit 7' WINCH; touch trap-set; while :; do sleep 0.05; done`
	p, d := enginetest.NewPlan(t, "/bin/sh", []string{"-c", script}, nil)
	dir := handToSpare(t, sp, p)
	res := make(chan attachResult, 1)
	go func() { res <- attachPipes(t, dir, nil) }()
	waitFor(t, "the program to set its trap", func() bool {
		_, err := os.Stat(filepath.Join(d.Workspace, "trap-set"))
		return err == nil
	}, nil)
	w, err := shim.Watch(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Signal(syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	var r attachResult
	select {
	case r = <-res:
	case <-time.After(failTimeout):
		w.Stop()
		t.Fatal("the program did not get SIGWINCH (stopped)")
	}
	if st := waitStatus(t, dir); st.BoxPid != pre {
		t.Fatalf("box pid %d, want the prestarted box-init %d", st.BoxPid, pre)
	}
	if r.err != nil || r.code != 7 || string(r.stdout) != "got-winch\n" {
		t.Fatalf("after SIGWINCH: exit %d, %v, stdout %q, stderr %q; want 7 and got-winch", r.code, r.err, r.stdout, r.stderr)
	}
}

// TestSpareShimUnused: a spare whose socket closes, or that gets SIGTERM, without a launch
// exits, and so does the box-init it started ahead (nothing of it is left behind). So does a
// spare handed a launch it cannot take, once it has told the daemon and the client why.
func TestSpareShimUnused(t *testing.T) {
	requireNative(t)
	for _, tc := range []struct {
		name string
		end  func(sp *shim.Spare) error
	}{
		{"closed", func(sp *shim.Spare) error { return sp.Close() }},
		// The spare subscribes to SIGTERM while it waits (to stop a launch's box later): before
		// it has a launch, SIGTERM still ends it, as it did when it had no handler (a guard
		// against the subscription keeping an unused spare alive).
		{"SIGTERM", func(sp *shim.Spare) error { return syscall.Kill(sp.Pid(), syscall.SIGTERM) }},
		// The daemon answers an attached launch's client once the spare has the launch and its
		// socket, before the spare's own answer (shim.Spare.Hand): a launch the spare cannot
		// take (here its configuration has a field no shim knows) reaches the client, connected
		// before the spare read it, as a refusal with the reason, and the daemon as the
		// spare's answer; neither gets a reset connection.
		{"handed a launch it cannot read", func(sp *shim.Spare) error {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, launchdir.ShimConfigFile), []byte(`{"bogus":1}`), 0o600); err != nil {
				return err
			}
			h, err := sp.Hand(dir)
			if err != nil {
				return err
			}
			_, err = console.Dial(filepath.Join(dir, launchdir.SocketFile), console.Hello{Role: console.RoleAttach})
			var re *console.ReplyError
			if !errors.As(err, &re) || re.Code != engine.CodeBoxSetupFailed || !strings.Contains(re.Message, launchdir.ShimConfigFile) {
				return fmt.Errorf("the client's attach: %v; want a refusal %s naming %s", err, engine.CodeBoxSetupFailed, launchdir.ShimConfigFile)
			}
			if _, err := h.Wait(); err == nil || !strings.Contains(err.Error(), launchdir.ShimConfigFile) {
				return fmt.Errorf("the spare's answer: %v; want its failure naming %s", err, launchdir.ShimConfigFile)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := shim.StartSpare()
			if err != nil {
				t.Fatal(err)
			}
			defer sp.Close()
			pre := prestartedBoxInit(t, sp)
			if err := tc.end(sp); err != nil {
				t.Fatal(err)
			}
			gone := func(pid int) bool {
				b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
				return err != nil || strings.Contains(string(b), ") Z ")
			}
			deadline := time.Now().Add(failTimeout)
			for time.Now().Before(deadline) && !(gone(sp.Pid()) && gone(pre)) {
				time.Sleep(10 * time.Millisecond)
			}
			if !gone(sp.Pid()) || !gone(pre) {
				t.Fatalf("spare %d gone %v, box-init %d gone %v", sp.Pid(), gone(sp.Pid()), pre, gone(pre))
			}
		})
	}
}

// TestHeldBox: an attached native launch builds its box before its client attaches and starts
// the program only when it does; a launch that never sees its client, or is stopped first,
// ends without its program ever running; a box whose set-up fails before its client attaches
// keeps the reason for the client that comes late.
func TestHeldBox(t *testing.T) {
	requireNative(t)

	t.Run("built before the attach, program after", func(t *testing.T) {
		dir, d := nativeLaunch(t, shim.Config{}, "/bin/sh", []string{"-c", "echo ran > ran; cat"}, nil)
		w, err := shim.Watch(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		// The box starts (box-init, namespaces, mounts) with no client attached ...
		for ev := range w.Events {
			if ev.Kind == shim.EventStarted || (ev.Kind == shim.EventStatus && ev.Status.BoxPid != 0) {
				break
			}
			if ev.Kind == shim.EventExec || ev.Kind == shim.EventExit {
				t.Fatalf("event %s before any client attached", ev.Kind)
			}
		}
		// ... but its program has not run.
		time.Sleep(100 * time.Millisecond)
		if _, err := os.Stat(filepath.Join(d.Workspace, "ran")); err == nil {
			t.Fatal("the program ran before its client attached")
		}
		st, err := shim.Query(dir)
		if err != nil || st.Execd {
			t.Fatalf("status before the attach: %+v, %v", st, err)
		}
		r := attachPipes(t, dir, []byte("hello"))
		if r.err != nil || r.code != 0 || string(r.stdout) != "hello" {
			t.Fatalf("Attach = %d, %v, %q, %q", r.code, r.err, r.stdout, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(d.Workspace, "ran")); err != nil {
			t.Fatalf("the program did not run after the attach: %v", err)
		}
	})

	t.Run("no client: the program never runs", func(t *testing.T) {
		dir, d := nativeLaunch(t, shim.Config{AttachTimeout: 300 * time.Millisecond}, "/bin/sh", []string{"-c", "echo ran > ran"}, nil)
		st := waitStatus(t, dir)
		if st.State != api.StateFailed || st.Error == nil || st.Error.Code != shim.CodeAttachTimeout || st.Execd || !st.Settled {
			t.Fatalf("status %+v (error %+v)", st, st.Error)
		}
		if _, err := os.Stat(filepath.Join(d.Workspace, "ran")); err == nil {
			t.Fatal("the program ran without a client")
		}
	})

	t.Run("stopped before the attach", func(t *testing.T) {
		dir, d := nativeLaunch(t, shim.Config{}, "/bin/sh", []string{"-c", "echo ran > ran"}, nil)
		w, err := shim.Watch(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.Stop(); err != nil {
			t.Fatal(err)
		}
		st := waitStatus(t, dir)
		if st.State != api.StateFailed || st.Error == nil || st.Error.Code != shim.CodeStoppedBeforeStart || !st.Stopped || st.Execd || !st.Settled {
			t.Fatalf("status %+v (error %+v)", st, st.Error)
		}
		if _, err := os.Stat(filepath.Join(d.Workspace, "ran")); err == nil {
			t.Fatal("a stopped launch ran its program")
		}
	})

	t.Run("set-up failure reaches a late client", func(t *testing.T) {
		p, _ := enginetest.NewPlan(t, "/bin/true", nil, nil)
		req, err := (&native.Engine{}).Request(p)
		if err != nil {
			t.Fatal(err)
		}
		s, err := spec.Parse(req)
		if err != nil {
			t.Fatal(err)
		}
		// A bind whose source is gone by the time the box is built.
		s.Mounts = append(s.Mounts, spec.Mount{Kind: spec.KindBind, Source: filepath.Join(t.TempDir(), "gone"), Target: "/mnt/gone"})
		req, err = json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		dir := launchRaw(t, t.TempDir(), shim.Config{Engine: native.Name, Console: p.Console}, req)
		w, err := shim.Watch(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for ev := range w.Events {
			if ev.Kind == shim.EventExit {
				break
			}
		}
		r := attachPipes(t, dir, nil)
		var se *console.StartError
		if !errors.As(r.err, &se) || se.Code != engine.CodeBoxSetupFailed || !strings.Contains(se.Message, "gone") {
			t.Fatalf("late client: %d, %v; want the box's set-up failure", r.code, r.err)
		}
	})
}

// TestProgramSignalsDefault: the program starts with no signal ignored or blocked, although the
// shim above its box ignores SIGHUP and SIGPIPE (a shell could not trap a signal ignored on
// entry, and a pipeline would not see EPIPE as SIGPIPE).
func TestProgramSignalsDefault(t *testing.T) {
	requireNative(t)
	dir, _ := nativeLaunch(t, shim.Config{}, "/bin/sh", []string{"-c", "grep -E '^Sig(Ign|Blk):' /proc/self/status"}, nil)
	r := attachPipes(t, dir, nil)
	if r.err != nil || r.code != 0 {
		t.Fatalf("Attach = %d, %v (stderr %q)", r.code, r.err, r.stderr)
	}
	out := string(r.stdout)
	if !strings.Contains(out, "SigIgn:\t0000000000000000") || !strings.Contains(out, "SigBlk:\t0000000000000000") {
		t.Fatalf("the program starts with signals ignored or blocked:\n%s", out)
	}
}

// startSpare starts a spare shim (closed at cleanup) and returns it with its prestarted
// box-init's pid.
func startSpare(t *testing.T) (*shim.Spare, int) {
	t.Helper()
	sp, err := shim.StartSpare()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp, prestartedBoxInit(t, sp)
}

// handToSpare writes the launch directory of plan p (native engine) and hands it to the spare
// sp, as the daemon does for an attached launch (shim.Spare.Hand): the caller's client then
// connects while the spare takes the launch, before its answer has been read. The answer (the
// spare's pid, no error) is checked at cleanup. It returns the directory.
func handToSpare(t *testing.T, sp *shim.Spare, p *plan.Plan) string {
	t.Helper()
	req, err := (&native.Engine{}).Request(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, launchdir.RequestFile), req, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := shim.WriteConfig(dir, shim.Config{LaunchID: testLaunchID, Engine: native.Name, Console: p.Console}); err != nil {
		t.Fatal(err)
	}
	h, err := sp.Hand(dir)
	if err != nil {
		t.Fatalf("spare Hand: %v", err)
	}
	type answer struct {
		pid int
		err error
	}
	ans := make(chan answer, 1)
	go func() { p, err := h.Wait(); ans <- answer{p.Pid, err} }()
	t.Cleanup(func() {
		if a := <-ans; a.err != nil || a.pid != sp.Pid() {
			t.Errorf("the spare's answer: pid %d, %v; want %d and no error", a.pid, a.err, sp.Pid())
		}
	})
	return dir
}

// prestartedBoxInit waits for the box-init a spare shim starts ahead and returns its pid.
func prestartedBoxInit(t *testing.T, sp *shim.Spare) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if pre := childWithArgs(sp.Pid(), "agentbox", "box-init", "-wait", "-loopback"); pre != 0 {
			return pre
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("spare shim %d started no box-init ahead", sp.Pid())
	return 0
}
