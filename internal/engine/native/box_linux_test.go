package native_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/enginetest"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/linux/proc"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/testenv"
)

// probePlan is a plan whose program is the test binary running nativeProbe with args.
func probePlan(t *testing.T, args []string, mod func(*plan.Input)) (*plan.Plan, enginetest.Dirs) {
	t.Helper()
	return enginetest.NewPlan(t, "/", nil, func(in *plan.Input) {
		in.Program = enginetest.Probe(t, enginetest.Dirs{Workspace: in.Workspace, RunDir: in.RunDir})
		in.Args = append([]string{"native-probe"}, args...)
		if mod != nil {
			mod(in)
		}
	})
}

// runProbe runs the box and decodes the probe's JSON output into v.
func runProbe(t *testing.T, p *plan.Plan, o enginetest.Options, v any) enginetest.Result {
	t.Helper()
	r := enginetest.RunBox(t, &native.Engine{}, p, o)
	if ev := r.Error(); ev != nil {
		t.Fatalf("box reported %s: %s", ev.Code, ev.Message)
	}
	if r.Exit != 0 {
		t.Fatalf("probe exit %d: stdout %q stderr %q", r.Exit, r.Stdout, r.Stderr)
	}
	if err := json.Unmarshal(r.Stdout, v); err != nil {
		t.Fatalf("probe output %q: %v", r.Stdout, err)
	}
	return r
}

func TestProgramRestrictions(t *testing.T) {
	t.Parallel()
	p, _ := probePlan(t, []string{"restrictions"}, nil)
	var got map[string]string
	runProbe(t, p, enginetest.Options{}, &got)
	want := map[string]string{
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2",
		"socket/unix": "ok", "socket/inet": "ok", "socket/netlink-route": "ok",
		"socket/netlink-audit": "EPERM", "socket/packet": "EPERM", "socket/unix-highbits": "EPERM",
		"ioctl/tiocsti": "EPERM", "ioctl/tiocsti-highbits": "EPERM", "ioctl/tioclinux": "EPERM",
		"ioctl/tiocgwinsz": "ENOTTY", // allowed through; stdin is a pipe
		"chmod/0755":       "ok", "chmod/4755": "EPERM", "fchmodat/2755": "EPERM", "fchmod/4755": "EPERM",
		"openat/create-4755": "EPERM", "openat/create-0644": "ok", "mknodat/fifo-4644": "EPERM",
		"clone/newuser": "EPERM", "clone/newns": "EPERM", "unshare/user": "EPERM",
		"clone3": "ENOSYS", "openat2": "ENOSYS", "io_uring_setup": "ENOSYS",
		"ptrace/traceme": "EPERM", "keyctl": "EPERM", "mount": "EPERM",
		"pidfd_getfd": "EPERM", "process_vm_readv": "EPERM", "x32/getpid": "EPERM",
		"kill/init": "EPERM",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
}

func TestForwards(t *testing.T) {
	t.Parallel()
	const port = 4711
	p, d := probePlan(t, []string{"forward", fmt.Sprintf("127.0.0.1:%d", port)}, nil)
	p.Network.Forwards = []plan.Forward{{Port: port, Socket: "/run/agentbox/echo.sock"}}
	ln, err := net.Listen("unix", filepath.Join(d.RunDir, "echo.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, _ := io.ReadAll(c)
			c.Write([]byte("pong:" + string(b)))
			c.Close()
		}
	}()
	var got string
	runProbe(t, p, enginetest.Options{}, &got)
	if got != "pong:ping" {
		t.Errorf("through the forward: %q, want %q", got, "pong:ping")
	}
}

func TestBeneathRefusesSymlinkEscape(t *testing.T) {
	t.Parallel()
	secret := t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, "key"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, link string
	}{
		{"Absolute", secret},
		{"DotDot", "../../../../../../../../" + strings.TrimPrefix(secret, "/")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, d := probePlan(t, []string{"read", "/srv/gitdir/key"}, nil)
			if err := os.Symlink(tc.link, filepath.Join(d.Workspace, "gitdir")); err != nil {
				t.Fatal(err)
			}
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountBind, Source: filepath.Join(d.Workspace, "gitdir"), Target: "/srv/gitdir", ReadOnly: true, Beneath: d.Workspace})
			r := enginetest.RunBox(t, &native.Engine{}, p, enginetest.Options{})
			ev := r.Error()
			if ev == nil || ev.Code != engine.CodeBoxSetupFailed || !strings.Contains(ev.Message, "gitdir") {
				t.Fatalf("events %+v, stdout %q: want a set-up failure naming gitdir", r.Events, r.Stdout)
			}
		})
	}
	t.Run("InsideIsBound", func(t *testing.T) {
		t.Parallel()
		p, d := probePlan(t, []string{"read", "/srv/gitdir/key"}, nil)
		if err := os.MkdirAll(filepath.Join(d.Workspace, "real"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d.Workspace, "real", "key"), []byte("inside"), 0o644)
		if err := os.Symlink("real", filepath.Join(d.Workspace, "gitdir")); err != nil {
			t.Fatal(err)
		}
		p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountBind, Source: filepath.Join(d.Workspace, "gitdir"), Target: "/srv/gitdir", ReadOnly: true, Beneath: d.Workspace})
		p.Landlock.RO = append(p.Landlock.RO, "/srv/gitdir")
		var got string
		runProbe(t, p, enginetest.Options{}, &got)
		if got != "inside" {
			t.Errorf("read %q", got)
		}
	})
}

func TestReadOnlyAndMaskedPaths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"write", "/proc/sysrq-trigger"}, "EROFS"},
		{[]string{"write", "/proc/sys/kernel/hostname"}, "EROFS"},
		{[]string{"read", "/proc/kcore"}, ""},
		{[]string{"read", "/proc/timer_list"}, ""},
		{[]string{"read", "/proc/keys"}, ""},
		{[]string{"read", "/etc/shadow"}, ""},
		{[]string{"write", "/etc/shadow"}, "EROFS"},
		{[]string{"mkdir", "/newdir"}, "EROFS"},  // the root tmpfs is read-only (Landlock would say EACCES)
		{[]string{"read", "/etc/hostname"}, "-"}, // positive control: a real file reads
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			t.Parallel()
			if _, err := os.Stat(tc.args[1]); err != nil && tc.args[0] != "mkdir" {
				t.Skipf("this kernel has no %s", tc.args[1])
			}
			p, _ := probePlan(t, tc.args, nil)
			var got string
			runProbe(t, p, enginetest.Options{}, &got)
			if tc.want == "-" {
				if got == "" {
					t.Errorf("read nothing")
				}
				return
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAbstractSocketScoped(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("agentbox-test-%d", os.Getpid())
	ln, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// With egress allow the box shares the host's network namespace, where the socket lives:
	// only Landlock's scope keeps the program from it.
	p, _ := probePlan(t, []string{"abstract", name}, func(in *plan.Input) { in.Egress = plan.EgressAllow })
	var got string
	runProbe(t, p, enginetest.Options{}, &got)
	if got != "EPERM" {
		t.Errorf("connect to a host abstract socket: %q, want EPERM", got)
	}
}

func TestProgramUnderHome(t *testing.T) {
	t.Parallel()
	// The plan binds a program outside the system dirs before the empty tmpfs over home; the
	// engine must order the tmpfs first.
	p, _ := enginetest.NewPlan(t, "/", nil, func(in *plan.Input) {
		home := filepath.Join(filepath.Dir(in.Workspace), "home")
		bin := filepath.Join(home, ".local", "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		in.Home = home
		in.Program = enginetest.Probe(t, enginetest.Dirs{Workspace: bin})
		in.Args = []string{"native-probe", "read", "/etc/hostname"}
	})
	var got string
	runProbe(t, p, enginetest.Options{}, &got)
	if got == "" {
		t.Error("probe under home read nothing")
	}
}

func TestSettlementHelpers(t *testing.T) {
	t.Parallel()
	p, _ := enginetest.NewPlan(t, "/bin/sleep", []string{"1000"}, nil)
	var pidNS uint64
	var during []int
	r := enginetest.RunBox(t, &native.Engine{}, p, enginetest.Options{AfterExec: func(b *engine.Box) {
		defer b.Process.Signal(unix.SIGTERM)
		inodes, err := ns.Inodes(b.Process.Pid)
		if err != nil {
			t.Error(err)
			return
		}
		own, _ := ns.Inodes(os.Getpid())
		for _, k := range ns.Kinds {
			if inodes[k] == own[k] {
				t.Errorf("box shares %s namespace", k)
			}
		}
		pidNS = inodes["pid"]
		if during, err = ns.Remaining(pidNS); err != nil {
			t.Error(err)
		}
	}})
	if r.Exit != 128+int(unix.SIGTERM) {
		t.Errorf("exit %d", r.Exit)
	}
	if len(during) < 2 {
		t.Errorf("while the box runs, Remaining found %v; want box-init and the program", during)
	}
	if ok, err := ns.Settled(pidNS); !ok || err != nil {
		t.Errorf("Settled = %v, %v after the box ended", ok, err)
	}
}

func TestRecursiveReadOnlyBind(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to make a submount on the host")
	}
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=64k"); err != nil {
		testenv.NoBoxes(t, "mount tmpfs: %v", err)
	}
	defer unix.Unmount(sub, unix.MNT_DETACH)
	p, _ := probePlan(t, []string{"write", "/srv/ro/sub/file"}, nil)
	p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountBind, Source: dir, Target: "/srv/ro", ReadOnly: true})
	// Grant writes there in Landlock, so that only the mount can refuse them.
	p.Landlock.RW = append(p.Landlock.RW, "/srv/ro")
	var got string
	runProbe(t, p, enginetest.Options{}, &got)
	if got != "EROFS" {
		t.Errorf("write in a submount of a read-only bind: %q, want EROFS", got)
	}
}

func TestBoxInitClosesLeakedFDs(t *testing.T) {
	t.Parallel()
	leak := filepath.Join(t.TempDir(), "leaked-into-the-shim")
	if err := os.WriteFile(leak, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Not close-on-exec: as if the shim had been started with a stray descriptor.
	fd, err := unix.Open(leak, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	p, _ := enginetest.NewPlan(t, "/bin/sleep", []string{"1000"}, nil)
	var held []string
	var skip error
	r := enginetest.RunBox(t, &native.Engine{}, p, enginetest.Options{AfterExec: func(b *engine.Box) {
		defer b.Process.Signal(unix.SIGTERM)
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", b.Process.Pid))
		if errors.Is(err, fs.ErrPermission) && os.Getuid() != 0 {
			// box-init is non-dumpable: its fd directory belongs to a root this user is not.
			skip = err
			return
		}
		if err != nil {
			t.Error(err)
			return
		}
		for _, e := range ents {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", b.Process.Pid, e.Name()))
			held = append(held, target)
		}
	}})
	if r.Exit != 128+int(unix.SIGTERM) {
		t.Errorf("exit %d", r.Exit)
	}
	if skip != nil {
		t.Skipf("needs root to read a non-dumpable box-init's descriptors: %v", skip)
	}
	if len(held) == 0 {
		t.Fatal("read no descriptors of box-init")
	}
	for _, h := range held {
		if h == leak {
			t.Errorf("box-init holds the shim's leaked descriptor (%s); it holds %v", leak, held)
		}
	}
}

// TestProcOfBoxInitHidden guards the /proc entries of box-init (and of its threads) from the
// program. box-init is non-dumpable, so the kernel makes the root of the box's user namespace
// the owner of its /proc entries; run by root the uid map is 0→0, the program is that owner,
// and without a fix it could list box-init's 0500 fd directory (descriptor numbers), by
// /proc/1/fd as well as by each thread's /proc/<tid>/fd.
func TestProcOfBoxInitHidden(t *testing.T) {
	t.Parallel()
	p, _ := probePlan(t, []string{"proc-others"}, nil)
	var got map[string][]string
	runProbe(t, p, enginetest.Options{}, &got)
	if len(got["control"]) == 0 {
		t.Fatalf("the probe could not read its own /proc entries: %v", got)
	}
	if b := got["breaches"]; len(b) > 0 {
		t.Errorf("the program reached box-init's /proc entries (uid %d): %v", os.Getuid(), b)
	}
}

// badSeccompEngine is the native engine with a request whose seccomp profile box-exec does not
// know: box-exec fails on the spec alone, which it gets as soon as box-init does, before the
// box is built.
type badSeccompEngine struct{ native.Engine }

func (e *badSeccompEngine) Request(p *plan.Plan) ([]byte, error) {
	b, err := e.Engine.Request(p)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["seccomp"] = "no-such-profile"
	return json.Marshal(m)
}

// TestExecStageFailsEarly: a box-exec that fails on the spec (sent to it before the box is
// built) has exited by the time box-init has built the box and hands it the rest: its report
// still reaches the shim, as the box's set-up failure, and the program never runs.
func TestExecStageFailsEarly(t *testing.T) {
	t.Parallel()
	p, _ := probePlan(t, []string{"restrictions"}, nil)
	r := enginetest.RunBox(t, &badSeccompEngine{}, p, enginetest.Options{})
	ev := r.Error()
	if ev == nil || ev.Code != engine.CodeBoxSetupFailed || !strings.Contains(ev.Message, `unknown seccomp profile "no-such-profile"`) {
		t.Fatalf("events %+v (exit %d), want %s naming the unknown seccomp profile", r.Events, r.Exit, engine.CodeBoxSetupFailed)
	}
	for _, e := range r.Events {
		if e.Kind == engine.EventExec {
			t.Fatalf("the program was exec'd: events %+v", r.Events)
		}
	}
	if len(r.Stdout) != 0 {
		t.Fatalf("the probe ran: %q", r.Stdout)
	}
}

// TestOverlay: an overlay's lower folder is read in the box and never written (the write lands
// in the upper layer), as root and as an ordinary user (box-init needs CAP_DAC_OVERRIDE in the
// box's user namespace for it); an upper layer that is a symlink leading out of the folder it
// must lie beneath refuses the box, and the folder it names gets nothing.
func TestOverlay(t *testing.T) {
	t.Parallel()
	layers := func(t *testing.T) (lower, cache string) {
		lower, cache = t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(lower, "a"), []byte("from the lower layer"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"upper", "work"} {
			if err := os.Mkdir(filepath.Join(cache, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		return lower, cache
	}
	overlay := func(lower, cache string) plan.Mount {
		return plan.Mount{Kind: plan.MountOverlay, Source: lower, Upper: filepath.Join(cache, "upper"), Work: filepath.Join(cache, "work"),
			Beneath: cache, Target: "/srv/cache"}
	}
	t.Run("ReadsLowerWritesUpper", func(t *testing.T) {
		t.Parallel()
		lower, cache := layers(t)
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"read", "/srv/cache/a"}, "from the lower layer"},
			{[]string{"write", "/srv/cache/a"}, "ok"},
			{[]string{"write", "/srv/cache/new"}, "ok"},
		} {
			p, _ := probePlan(t, c.args, nil)
			p.Mounts = append(p.Mounts, overlay(lower, cache))
			p.Landlock.RW = append(p.Landlock.RW, "/srv/cache")
			var got string
			runProbe(t, p, enginetest.Options{}, &got)
			if got != c.want {
				t.Errorf("%v in the box: %q, want %q", c.args, got, c.want)
			}
		}
		if b, err := os.ReadFile(filepath.Join(lower, "a")); err != nil || string(b) != "from the lower layer" {
			t.Errorf("the lower layer's file is now %q (%v)", b, err)
		}
		if _, err := os.Stat(filepath.Join(lower, "new")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the box's new file is in the lower layer: %v", err)
		}
		for _, f := range []string{"a", "new"} {
			if b, err := os.ReadFile(filepath.Join(cache, "upper", f)); err != nil || string(b) != "x" {
				t.Errorf("upper/%s: %q (%v), want the box's write", f, b, err)
			}
		}
	})
	// A box cache's overlay is mounted volatile (plan.Mount.Volatile: its unmount does not
	// sync the host's file system), any other is not: the box's mountinfo says which.
	t.Run("Volatile", func(t *testing.T) {
		t.Parallel()
		for _, volatile := range []bool{true, false} {
			lower, cache := layers(t)
			p, _ := probePlan(t, []string{"read", "/proc/self/mountinfo"}, nil)
			m := overlay(lower, cache)
			m.Volatile = volatile
			t.Cleanup(func() { // the kernel's work/ and its marker folders are mode 0
				for _, d := range []string{"work", "work/incompat", "work/incompat/volatile"} {
					os.Chmod(filepath.Join(cache, "work", d), 0o700)
				}
			})
			p.Mounts = append(p.Mounts, m)
			var got string
			runProbe(t, p, enginetest.Options{}, &got)
			line := ""
			for _, l := range strings.Split(got, "\n") {
				if f := strings.Fields(l); len(f) > 4 && f[4] == "/srv/cache" {
					line = l
				}
			}
			if line == "" || strings.Contains(line, "volatile") != volatile {
				t.Errorf("volatile %v: the overlay's line of the box's mountinfo: %q", volatile, line)
			}
		}
	})
	t.Run("SymlinkedUpperRefused", func(t *testing.T) {
		t.Parallel()
		lower, cache := layers(t)
		victim := t.TempDir()
		os.Remove(filepath.Join(cache, "upper"))
		if err := os.Symlink(victim, filepath.Join(cache, "upper")); err != nil {
			t.Fatal(err)
		}
		p, _ := probePlan(t, []string{"write", "/srv/cache/new"}, nil)
		p.Mounts = append(p.Mounts, overlay(lower, cache))
		p.Landlock.RW = append(p.Landlock.RW, "/srv/cache")
		r := enginetest.RunBox(t, &native.Engine{}, p, enginetest.Options{})
		if ev := r.Error(); ev == nil || ev.Code != engine.CodeBoxSetupFailed || !strings.Contains(ev.Message, "upper") {
			t.Fatalf("events %+v, stdout %q: want a set-up failure naming the upper layer", r.Events, r.Stdout)
		}
		if ents, _ := os.ReadDir(victim); len(ents) != 0 {
			t.Errorf("the folder the symlink named got %v", ents)
		}
	})
	// A workspace's dependency folder (node_modules) that another box replaced with a symlink
	// to a folder of the host's after the daemon looked at it: the lower layer is opened
	// beneath the workspace (SourceBeneath), so the box is refused rather than shown the
	// folder the symlink names. Before, box-init followed it and the box read the file.
	t.Run("SymlinkedLowerRefused", func(t *testing.T) {
		t.Parallel()
		secret, cache := layers(t)
		ws := t.TempDir()
		lower := filepath.Join(ws, "node_modules")
		if err := os.Symlink(secret, lower); err != nil {
			t.Fatal(err)
		}
		p, _ := probePlan(t, []string{"read", "/srv/cache/a"}, nil)
		m := overlay(lower, cache)
		m.SourceBeneath = ws
		p.Mounts = append(p.Mounts, m)
		p.Landlock.RW = append(p.Landlock.RW, "/srv/cache")
		r := enginetest.RunBox(t, &native.Engine{}, p, enginetest.Options{})
		if ev := r.Error(); ev == nil || ev.Code != engine.CodeBoxSetupFailed || !strings.Contains(ev.Message, "lower layer") {
			t.Fatalf("events %+v, stdout %q: want a set-up failure naming the lower layer", r.Events, r.Stdout)
		}
		if strings.Contains(string(r.Stdout), "from the lower layer") {
			t.Errorf("the box read the folder the symlink named: %q", r.Stdout)
		}
	})
}

// TestEndReportedAfterOthersGone: box-init reports the box's end before its own exit
// (engine.EventEnded) only once every other process of the box is gone. The program leaves two
// writers behind, each in a session of its own, ignoring SIGTERM and SIGHUP, and each holding
// inotify instances whose release makes even a killed writer take milliseconds to die: when
// the report comes, each is a zombie or gone, and the workspace file they wrote does not grow
// after it. The report carries the program's exit code, and comes once.
func TestEndReportedAfterOthersGone(t *testing.T) {
	endReportedAfterOthersGone(t, "slow-writers")
}

// TestAttackEndReportedWhileThreadsRun: as TestEndReportedAfterOthersGone, with writers whose
// thread group's leader has exited alone, their writing thread running on: /proc names each
// process a zombie, and box-init took it for gone and reported the box's end while its thread
// still ran (and the launch's check at exit could run before its last write landed).
func TestAttackEndReportedWhileThreadsRun(t *testing.T) {
	endReportedAfterOthersGone(t, "leader-exit-writers")
}

// endReportedAfterOthersGone runs the probe writers (slow-writers, leader-exit-writers) and
// checks that the box's end is reported only once no thread of any other process of the box
// runs, and that nothing is written after.
func endReportedAfterOthersGone(t *testing.T, writers string) {
	p, d := probePlan(t, []string{writers, "late"}, nil)
	var pidNS uint64
	var left []string
	ended := 0
	sizes := func() (n int64) {
		for i := 0; i < 2; i++ {
			if st, err := os.Stat(filepath.Join(d.Workspace, fmt.Sprintf("late.%d", i))); err == nil {
				n += st.Size()
			}
		}
		return n
	}
	var atEnd int64
	r := enginetest.RunBox(t, &native.Engine{}, p, enginetest.Options{
		AfterExec: func(b *engine.Box) {
			var err error
			if pidNS, err = ns.Inode(b.NamespacePid(), "pid"); err != nil {
				t.Errorf("the box's pid namespace: %v", err)
			}
		},
		AfterEnded: func(b *engine.Box, ev engine.Event) {
			ended++
			pids, err := ns.Remaining(pidNS)
			if err != nil {
				t.Errorf("processes of the box: %v", err)
			}
			for _, pid := range pids {
				if pid == b.Process.Pid {
					continue
				}
				// every thread of it: a leader that exited alone is a zombie while the others run
				tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
				for _, task := range tasks {
					tid, err := strconv.Atoi(task.Name())
					if err == nil && !proc.Ended(tid) {
						state, _ := proc.State(tid)
						left = append(left, fmt.Sprintf("%d, thread %d (%c)", pid, tid, state))
					}
				}
			}
			atEnd = sizes()
			if ev.Exit != 3 {
				t.Errorf("the end reported exit %d, want the program's 3", ev.Exit)
			}
		},
	})
	if r.Exit != 3 {
		t.Fatalf("box exit %d, want 3 (stderr %q)", r.Exit, r.Stderr)
	}
	if ended != 1 {
		t.Fatalf("box-init reported the box's end %d times, want once", ended)
	}
	if len(left) > 0 {
		t.Errorf("box-init reported the box's end while other processes of the box lived: %v", left)
	}
	if atEnd == 0 {
		t.Errorf("the writers wrote nothing before the end")
	}
	if n := sizes(); n != atEnd {
		t.Errorf("the writers wrote after the box's end was reported: %d bytes then, %d after box-init's exit", atEnd, n)
	}
}
