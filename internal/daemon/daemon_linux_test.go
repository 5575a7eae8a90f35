package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/boxhelper"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/proc"
	"github.com/agentbox/agentbox/internal/shim"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// agentboxBinaries returns the agentbox CLI and, beside it, the daemon binary (which the shims
// re-exec here: it has the box's entry points): $AGENTBOX_BIN's, or both built now, once for
// the whole test binary (its tests run side by side; TestMain removes the build).
func agentboxBinaries(t *testing.T) (cli, daemonBin string) {
	if b := os.Getenv("AGENTBOX_BIN"); b != "" {
		return b, filepath.Join(filepath.Dir(b), boxhelper.DaemonName)
	}
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "agentbox-daemon-test-bin"); built.err != nil {
			return
		}
		build := exec.Command("go", "build", "-o", built.dir+"/", "github.com/agentbox/agentbox/cmd/agentbox", "github.com/agentbox/agentbox/cmd/agentbox-daemon")
		if b, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build agentbox: %v\n%s", err, b)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return filepath.Join(built.dir, boxhelper.CLIName), filepath.Join(built.dir, boxhelper.DaemonName)
}

// built is agentboxBinaries' build when $AGENTBOX_BIN is not set.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// setShimExecutable points the shims every test daemon starts at the daemon binary, once:
// the tests' daemons run side by side in this process and read shim.Executable.
var setShimExecutable sync.Once

type testDaemon struct {
	d        *Daemon
	c        *client.Client
	config   string // the user config file path
	policy   string // the system policy file path (absent unless a test writes it; owned by the test's uid)
	runtime  string
	work     string
	launches string
	root     string // the folder of its state, config and work folders (its runtime folder is on a tmpfs: runtimeDirs)
	stop     func() // ends the daemon (once; the test's cleanup does it too)
}

// startDaemon runs a daemon in this process with its own directories; wrap injects store faults.
func startDaemon(t *testing.T, wrap func(launchStore) launchStore) *testDaemon {
	t.Helper()
	return startDaemonWith(t, wrap, false)
}

// startDaemonWith is startDaemon; noSpare makes every launch start its shim anew (no spare).
func startDaemonWith(t *testing.T, wrap func(launchStore) launchStore, noSpare bool) *testDaemon {
	t.Helper()
	return startDaemonOpts(t, Options{wrapStore: wrap, noSpare: noSpare})
}

// startDaemonOpts is startDaemon with the test-only fields of opts (wrapStore, noSpare,
// beforeWatch, brokers, afterEnded, beforeBytecode, machineCPU, spareRefillMax); its
// folders, configuration and logger are the test's own.
func startDaemonOpts(t *testing.T, opts Options) *testDaemon {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "abd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return startDaemonIn(t, root, opts)
}

// runtimeDirs maps the root of a test daemon's folders to its runtime directory, on a tmpfs
// as a user's is (testenv.RuntimeDir): a daemon started again in the folders of one that ended
// (startDaemonIn, within the same test) takes the same. The entry goes when that test ends.
var runtimeDirs sync.Map

// runtimeDirFor is the runtime directory of the test daemon whose other folders are under
// root: made on the first call for that root within t (runtimeDirs).
func runtimeDirFor(t testing.TB, root string) string {
	t.Helper()
	if rt, ok := runtimeDirs.Load(root); ok {
		return rt.(string)
	}
	rt := testenv.RuntimeDir(t, "abd")
	runtimeDirs.Store(root, rt)
	t.Cleanup(func() { runtimeDirs.Delete(root) })
	return rt
}

// startDaemonIn is startDaemonOpts with the folders under root, made when absent: a daemon
// started again in the folders of one that ended takes over what it left (readopt).
func startDaemonIn(t *testing.T, root string, opts Options) *testDaemon {
	t.Helper()
	_, exe := agentboxBinaries(t)
	setShimExecutable.Do(func() { shim.Executable = exe })
	mk := func(n string) string {
		d := filepath.Join(root, n)
		if err := os.Mkdir(d, 0o700); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		return d
	}
	state, cfgDir, work := mk("state"), mk("config"), mk("work")
	runtime := runtimeDirFor(t, root)
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return cfgDir
		}
		return ""
	}
	ctx, cancel := context.WithCancel(context.Background())
	// The test's hooks (the unexported fields) with the folders and configuration of its own.
	opts.RuntimeDir, opts.StateDir, opts.Logger = runtime, state, nil
	opts.Config = config.LoadOptions{Getenv: getenv, PolicyFile: filepath.Join(root, "no-policy.yaml"), PolicyOwner: os.Getuid()}
	d, err := newDaemon(opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.serve(ctx) }()
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	c := client.NewAt(filepath.Join(runtime, "agentbox.sock"))
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	return &testDaemon{d: d, c: c, config: filepath.Join(cfgDir, "agentbox", "config.yaml"), policy: filepath.Join(root, "no-policy.yaml"), runtime: runtime, work: work, launches: filepath.Join(runtime, "launches"),
		root: root, stop: stop}
}

// shimsOf lists the host pids of shims (and so boxes) started under runtime.
func shimsOf(runtime string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if strings.Contains(string(b), "box-shim\x00"+runtime+"/") {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

type failingStore struct {
	launchStore
	failCreate, failShim bool
}

var errInjected = errors.New("injected store failure")

func (f *failingStore) CreateLaunch(ctx context.Context, l *store.Launch, sessions ...store.Session) error {
	if f.failCreate {
		return errInjected
	}
	return f.launchStore.CreateLaunch(ctx, l, sessions...)
}

func (f *failingStore) SetShim(ctx context.Context, id string, pid int, start uint64) error {
	if f.failShim {
		return errInjected
	}
	return f.launchStore.SetShim(ctx, id, pid, start)
}

func sleepRequest(t *testing.T, work string) *api.LaunchRequest {
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	return &api.LaunchRequest{Program: "sleep", Path: path, Args: []string{"300"}, Workspace: work, Detach: true}
}

// TestRecordFailureStopsBox guards "if recording fails the box is stopped": the shim (and the
// box it started) must be gone and the launch directory removed when the store refuses the
// shim's record. (With a spare shim the shim's identity is part of the launch's first record,
// so this is the path of a launch that starts its shim anew: no spare, or a spare that failed.)
func TestRecordFailureStopsBox(t *testing.T) {
	t.Parallel()
	fs := &failingStore{failShim: true}
	td := startDaemonWith(t, func(s launchStore) launchStore { fs.launchStore = s; return fs }, true)
	_, err := td.c.Launch(context.Background(), sleepRequest(t, td.work))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeStoreFailed {
		t.Fatalf("launch error = %v, want %s", err, api.CodeStoreFailed)
	}
	waitFor(t, "shim and box gone", func() bool { return len(shimsOf(td.runtime)) == 0 })
	ents, _ := os.ReadDir(td.launches)
	if len(ents) != 0 {
		t.Fatalf("launch directories left behind: %v", ents)
	}
	// The rollback records the launch failed, with the reason and the stages it completed.
	ls, err := td.c.ListLaunches(context.Background(), client.LaunchQuery{})
	if err != nil || len(ls) != 1 {
		t.Fatalf("launches: %v, %v", ls, err)
	}
	if l := ls[0]; l.State != api.StateFailed || l.Error == nil || l.Error.Code != api.CodeStoreFailed || len(l.Stages) == 0 || l.Stages[len(l.Stages)-1].Name != "shim" {
		t.Errorf("record of the rolled-back launch: state %s error %+v stages %+v; want failed, %s, through shim", l.State, l.Error, l.Stages, api.CodeStoreFailed)
	}
}

// TestCreateFailureRunsNothing: when the launch cannot be recorded, no shim is started at all.
func TestCreateFailureRunsNothing(t *testing.T) {
	t.Parallel()
	fs := &failingStore{failCreate: true}
	td := startDaemon(t, func(s launchStore) launchStore { fs.launchStore = s; return fs })
	_, err := td.c.Launch(context.Background(), sleepRequest(t, td.work))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeStoreFailed {
		t.Fatalf("launch error = %v, want %s", err, api.CodeStoreFailed)
	}
	if pids := shimsOf(td.runtime); len(pids) != 0 {
		t.Fatalf("a shim was started although the launch was not recorded: %v", pids)
	}
}

// TestCreateFailureAttachedRunsNothing: an attached launch through a spare shim is recorded
// while the spare builds its box (the program waits for its client, which waits for the
// answer); when the record fails, the box is stopped before its program ever ran, the answer
// is the store's error, and nothing of the launch is left.
func TestCreateFailureAttachedRunsNothing(t *testing.T) {
	t.Parallel()
	fs := &failingStore{failCreate: true}
	td := startDaemon(t, func(s launchStore) launchStore { fs.launchStore = s; return fs })
	var spare int
	waitFor(t, "a spare shim", func() bool { spare = td.spareShim(); return spare != 0 })
	marker := filepath.Join(td.work, "ran")
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	_, err = td.c.Launch(context.Background(), &api.LaunchRequest{Program: "sh", Path: sh, Args: []string{"-c", "touch " + marker}, Workspace: td.work})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeStoreFailed {
		t.Fatalf("launch error = %v, want %s", err, api.CodeStoreFailed)
	}
	// Stopped by the daemon, not ended by its attach timeout (30 s) with nobody attaching.
	deadline := time.Now().Add(shim.DefaultAttachTimeout * 2 / 3)
	for unix.Kill(spare, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the spare %d that took the unrecorded launch is still there: not stopped by the daemon", spare)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the program of an unrecorded launch ran (%v)", err)
	}
	waitFor(t, "launch directory removed", func() bool {
		ents, _ := os.ReadDir(td.launches)
		return len(ents) == 0
	})
}

// runToEnd launches req (detached) and waits until the launch has ended; it returns the
// launch's record then.
func (td *testDaemon) runToEnd(t *testing.T, req *api.LaunchRequest) *api.Launch {
	t.Helper()
	ctx := context.Background()
	req.Detach = true
	resp, err := td.c.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var l *api.Launch
	waitFor(t, "the box to exit", func() bool {
		l, err = td.c.Get(ctx, resp.ID)
		return err == nil && l.State != api.StateRunning && l.State != api.StateStarting
	})
	return l
}

// spareShim returns the pid of td's daemon's spare shim, 0 if none.
func (td *testDaemon) spareShim() int {
	if pids := td.spareShims(); len(pids) > 0 {
		return pids[0]
	}
	return 0
}

// newSpare returns the pid of a spare shim of td's daemon that is not in old, 0 if none.
func (td *testDaemon) newSpare(old ...int) int {
	for _, p := range td.spareShims() {
		if !slices.Contains(old, p) {
			return p
		}
	}
	return 0
}

// spareShims returns the pid of the spare shim td's daemon holds, when that process is there
// as a spare (`box-shim -spare`); none otherwise. Only td's daemon's: the package's tests run
// their daemons side by side in this process, each with spares of its own.
func (td *testDaemon) spareShims() []int {
	td.d.spareMu.Lock()
	sp := td.d.spare
	td.d.spareMu.Unlock()
	if sp == nil {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(sp.Pid()) + "/cmdline")
	if err != nil || !strings.Contains(string(b), "box-shim\x00-spare") {
		return nil
	}
	return []int{sp.Pid()}
}

// TestLaunchStopSettles: a detached box is recorded running, and stop ends it settled with the
// program's signal status.
func TestLaunchStopSettles(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, nil)
	ctx := context.Background()
	resp, err := td.c.Launch(ctx, sleepRequest(t, td.work))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "launch running", func() bool {
		l, err := td.c.Get(ctx, resp.ID)
		return err == nil && l.State == api.StateRunning
	})
	l, err := td.c.Stop(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l.State != api.StateExited || l.ExitCode == nil || *l.ExitCode != 128+15 || !l.Settled {
		t.Fatalf("after stop: state=%s exit=%v settled=%v, want exited 143 settled", l.State, l.ExitCode, l.Settled)
	}
	if _, err := os.Stat(filepath.Join(td.launches, resp.ID)); !os.IsNotExist(err) {
		t.Fatalf("launch directory still there: %v", err)
	}
}

// TestSpareRefillWaitsForAnIdleCPU: the spare a launch took is replaced only once the machine
// has a CPU's worth of idle time (refillSpareWhenIdle): while /proc/stat says busy, polls pass
// and no spare starts; once it says idle, one does. (Before, the spare was replaced 250 ms
// after the program started, busy or not, in the middle of an agent's start.)
func TestSpareRefillWaitsForAnIdleCPU(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	idle, reads := false, 0
	var sample proc.MachineCPU
	sample.CPUs = 2
	read := func() (proc.MachineCPU, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		sample.Total += 20 // 100 ms of two CPUs at USER_HZ 100
		if idle {
			sample.Idle += 15
		} else {
			sample.Idle += 2
		}
		return sample, nil
	}
	td := startDaemonOpts(t, Options{machineCPU: read, spareRefillMax: time.Hour})
	first := td.runOnSpare(t)
	mu.Lock()
	base := reads
	mu.Unlock()
	waitFor(t, "three polls of a busy machine, or a spare", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return reads >= base+3 || td.d.spareReady()
	})
	if td.d.spareReady() {
		t.Fatalf("a spare was started while the machine was busy (spare shim %d)", td.spareShim())
	}
	mu.Lock()
	idle = true
	mu.Unlock()
	waitFor(t, "a new spare once the machine is idle", func() bool { return td.newSpare(first) != 0 })
}

// TestSpareRefillAtTheDeadline: on a machine that stays busy, the spare a launch took is still
// replaced, at spareRefillMax after the program started.
func TestSpareRefillAtTheDeadline(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	sample := proc.MachineCPU{CPUs: 2}
	busy := func() (proc.MachineCPU, error) {
		mu.Lock()
		defer mu.Unlock()
		sample.Total += 20
		return sample, nil
	}
	td := startDaemonOpts(t, Options{machineCPU: busy, spareRefillMax: 300 * time.Millisecond})
	first := td.runOnSpare(t)
	waitFor(t, "a new spare at the deadline, the machine busy", func() bool { return td.newSpare(first) != 0 })
}

// spareReady reports whether td's daemon has a spare there or starting.
func (d *Daemon) spareReady() bool {
	d.spareMu.Lock()
	defer d.spareMu.Unlock()
	return d.spare != nil || d.spareStarting
}

// runOnSpare waits for td's spare shim, launches a long sleep on it (stopped when t ends)
// and waits until its program runs; it returns the spare's pid.
func (td *testDaemon) runOnSpare(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	first := 0
	waitFor(t, "the first spare shim", func() bool { first = td.spareShim(); return first != 0 })
	resp, err := td.c.Launch(ctx, sleepRequest(t, td.work))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { td.c.Stop(ctx, resp.ID) })
	waitFor(t, "launch running", func() bool {
		l, err := td.c.Get(ctx, resp.ID)
		return err == nil && l.State == api.StateRunning
	})
	return first
}

// TestRefusals: bad requests get typed errors naming what is wrong.
func TestRefusals(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, nil)
	ctx := context.Background()
	home, _ := os.UserHomeDir()
	plainFile := filepath.Join(td.work, "notes.txt")
	if err := os.WriteFile(plainFile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mut  func(*api.LaunchRequest)
		code string
	}{
		{"root workspace", func(r *api.LaunchRequest) { r.Workspace = "/" }, api.CodeWorkspaceRefused},
		{"home workspace", func(r *api.LaunchRequest) { r.Workspace = home }, api.CodeWorkspaceRefused},
		{"missing workspace", func(r *api.LaunchRequest) { r.Workspace = "/nonexistent/dir" }, api.CodeWorkspaceRefused},
		{"relative program", func(r *api.LaunchRequest) { r.Path = "sleep" }, api.CodeBadRequest},
		{"missing program", func(r *api.LaunchRequest) { r.Path = "/nonexistent/prog" }, api.CodeProgramNotFound},
		{"not executable", func(r *api.LaunchRequest) { r.Path = plainFile }, api.CodeProgramNotExec},
		{"bad egress", func(r *api.LaunchRequest) { r.Egress = "open" }, api.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := sleepRequest(t, td.work)
			tc.mut(req)
			_, err := td.c.Launch(ctx, req)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
			if ae.Message == "" {
				t.Fatal("empty message")
			}
		})
	}
	if pids := shimsOf(td.runtime); len(pids) != 0 {
		t.Fatalf("refused launches started shims: %v", pids)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAttackBadConfigRefusesLaunches guards issue 21, finding 6: a config file made invalid
// while the daemon runs was ignored silently, and launches ran on the last good configuration
// (which may be looser than what the user just wrote). Now every launch is refused with the
// file, line and field, info says the same, and a launch runs again once the file is fixed.
func TestAttackBadConfigRefusesLaunches(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, nil)
	ctx := context.Background()
	if err := os.MkdirAll(filepath.Dir(td.config), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(td.config, []byte("stopGrace: 2s\negress: open\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // every time, not only the first
		resp, err := td.c.Launch(ctx, sleepRequest(t, td.work))
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != api.CodeConfigInvalid || !strings.Contains(ae.Message, "config.yaml:2") || !strings.Contains(ae.Message, "egress") {
			if resp != nil {
				td.c.Stop(ctx, resp.ID)
			}
			t.Fatalf("launch %d with a bad config file: %v, want %s naming config.yaml:2 and egress", i, err, api.CodeConfigInvalid)
		}
	}
	info, err := td.c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.ConfigError, "config.yaml:2") || !strings.Contains(info.ConfigError, "egress") {
		t.Fatalf("info.configError = %q, want file:line and the field", info.ConfigError)
	}
	if err := os.WriteFile(td.config, []byte("stopGrace: 2s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := td.c.Launch(ctx, sleepRequest(t, td.work))
	if err != nil {
		t.Fatalf("launch after the fix: %v", err)
	}
	if _, err := td.c.Stop(ctx, resp.ID); err != nil {
		t.Fatal(err)
	}
}

// TestAttackLockedEgress guards issue 21, findings 5 and 6: with the system policy at
// egress: deny, a per-run --egress allow (what `agentbox run --egress allow` and a launcher
// send) gave the box the host network; now it is refused naming the policy file and key. An
// invalid system policy refuses every launch until it is fixed.
func TestAttackLockedEgress(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, nil)
	ctx := context.Background()
	if err := os.WriteFile(td.policy, []byte("egress: deny\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req := sleepRequest(t, td.work)
	req.Egress = "allow"
	resp, err := td.c.Launch(ctx, req)
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeConfigLocked || !strings.Contains(ae.Message, td.policy+":1") || !strings.Contains(ae.Message, "egress") {
		if resp != nil {
			td.c.Stop(ctx, resp.ID)
		}
		t.Fatalf("--egress allow under a policy locking egress: %v, want %s naming %s:1 and egress", err, api.CodeConfigLocked, td.policy)
	}
	// The policy's own value may be asked for.
	req.Egress = "deny"
	if resp, err = td.c.Launch(ctx, req); err != nil {
		t.Fatalf("--egress deny under the same policy: %v", err)
	}
	td.c.Stop(ctx, resp.ID)

	if err := os.WriteFile(td.policy, []byte("egress: deny\nconsole: {clipboard: maybe}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req.Egress = ""
	resp, err = td.c.Launch(ctx, req)
	if !errors.As(err, &ae) || ae.Code != api.CodeConfigInvalid || !strings.Contains(ae.Message, td.policy+":2") {
		if resp != nil {
			td.c.Stop(ctx, resp.ID)
		}
		t.Fatalf("launch under an invalid policy: %v, want %s naming %s:2", err, api.CodeConfigInvalid, td.policy)
	}
}

// TestDetachedLaunchesEndingAtOnce: a detached program that exits at once can end before the
// daemon's watch of its shim connects (a spare shim starts it in a few milliseconds); the
// launch is still recorded from the shim's final status, never failed as a lost watch. The
// daemon here waits, before it watches, until the shim has written its final status and gone.
func TestDetachedLaunchesEndingAtOnce(t *testing.T) {
	t.Parallel()
	shimEnded := make(chan string, 8) // launch directories whose shim ended before their watch
	td := startDaemonOpts(t, Options{beforeWatch: func(dir string) {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join(dir, launchdir.StatusFile)); err == nil {
				if _, err := os.Stat(filepath.Join(dir, launchdir.SocketFile)); errors.Is(err, os.ErrNotExist) {
					shimEnded <- dir
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}})
	ctx := context.Background()
	path, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 3; i++ {
		resp, err := td.c.Launch(ctx, &api.LaunchRequest{Program: "true", Path: path, Workspace: td.work, Detach: true})
		if err != nil {
			t.Fatalf("launch %d: %v", i, err)
		}
		ids = append(ids, resp.ID)
		if i == 0 {
			// Stopping a launch whose shim has already ended (and that the daemon does not
			// watch) answers with its record. (The daemon answers the launch before it
			// watches: wait for the end its watch waits for.)
			select {
			case dir := <-shimEnded:
				if filepath.Base(dir) != resp.ID {
					t.Fatalf("shim of %s ended first, want %s", dir, resp.ID)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the shim of the first launch did not end")
			}
			if _, err := td.c.Stop(ctx, resp.ID); err != nil {
				t.Fatalf("stop of a launch that ended before its watch: %v", err)
			}
		}
	}
	for _, id := range ids {
		waitFor(t, "launch "+id+" ended", func() bool {
			l, err := td.c.Get(ctx, id)
			return err == nil && l.State != api.StateRunning && l.State != api.StateStarting
		})
		l, _ := td.c.Get(ctx, id)
		if l.State != api.StateExited || l.ExitCode == nil || *l.ExitCode != 0 {
			t.Errorf("launch %s: state %s, exit %v, error %+v; want exited 0", id, l.State, l.ExitCode, l.Error)
		}
	}

	// The client's exit summary asks once for the launch's end (api.WaitEnded): the answer
	// waits until the end is recorded, here for a program that runs 0.3 s after the launch
	// was answered; found by its whole id (one row) it is the record a prefix finds. It
	// carries the count of the proposed changes (none here), which a plain GET does not.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := td.c.Launch(ctx, &api.LaunchRequest{Program: "sh", Path: sh, Args: []string{"-c", "sleep 0.3; exit 3"}, Workspace: td.work, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := td.c.WaitEnded(ctx, resp.ID)
	if err != nil || l.State != api.StateExited || l.ExitCode == nil || *l.ExitCode != 3 || !l.Settled {
		t.Fatalf("WaitEnded = %+v, %v; want exited 3, settled", l, err)
	}
	if l.Proposed == nil || *l.Proposed != (api.ProposedCount{}) {
		t.Errorf("WaitEnded's proposed changes = %+v, want a count of none", l.Proposed)
	}
	byPrefix, err := td.c.Get(ctx, resp.ID[:8])
	if err != nil || byPrefix.ID != l.ID || byPrefix.State != l.State || !byPrefix.Ended.Equal(l.Ended) || *byPrefix.ExitCode != 3 || byPrefix.Proposed != nil {
		t.Errorf("by prefix %+v, %v; by the whole id %+v", byPrefix, err, l)
	}
}

// TestSpareReplaced: the spare a launch takes is replaced — once the launch has ended, and
// while a launch keeps running (after its program started). Without this every later launch
// would quietly start its shim anew.
func TestSpareReplaced(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, nil)
	ctx := context.Background()
	var first int
	waitFor(t, "a spare shim", func() bool { first = td.spareShim(); return first != 0 })
	path, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := td.c.Launch(ctx, &api.LaunchRequest{Program: "true", Path: path, Workspace: td.work, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	var second int
	waitFor(t, "a new spare after a launch that ended", func() bool { second = td.newSpare(first); return second != 0 })
	waitFor(t, "launch "+resp.ID+" ended", func() bool {
		l, err := td.c.Get(ctx, resp.ID)
		return err == nil && l.State != api.StateRunning && l.State != api.StateStarting
	})
	// A launch that keeps running.
	long, err := td.c.Launch(ctx, sleepRequest(t, td.work))
	if err != nil {
		t.Fatal(err)
	}
	var l *api.Launch
	waitFor(t, "the long launch running", func() bool {
		l, err = td.c.Get(ctx, long.ID)
		return err == nil && l.State == api.StateRunning
	})
	// A spare that is not the running launch's shim (which is the spare it took, unless the
	// launch came before the daemon had that spare ready).
	waitFor(t, "a spare while a launch runs", func() bool { return td.newSpare(first, l.ShimPid) != 0 })
	if _, err := td.c.Stop(ctx, long.ID); err != nil {
		t.Fatal(err)
	}
}

// TestLaunchStagesRecorded guards the per-stage timings of the launch pipeline: a launch's
// record (what `agentbox launches --json` prints) lists its stages in the order they ran, the
// watch that supervision connects included, each with a non-negative duration; with a spare
// shim (an attached launch, as `agentbox run` makes them: the spare's answer is read after the
// daemon's, the ready stage) and without one (a detached launch); once ended, the stages of
// its end follow (box, end-brokers, box-init-exit, work-removal).
func TestLaunchStagesRecorded(t *testing.T) {
	t.Parallel()
	for _, noSpare := range []bool{false, true} {
		t.Run(map[bool]string{false: "Spare", true: "NoSpare"}[noSpare], func(t *testing.T) {
			want := []string{"resolve", "layout", "prepare", "harness", "brokers", "plan", "request", "record", "shim", "record-shim", "watch"}
			td := startDaemonWith(t, nil, noSpare)
			ctx := context.Background()
			req := sleepRequest(t, td.work)
			if !noSpare {
				waitFor(t, "a spare shim", func() bool { return td.spareShim() != 0 })
				req.Detach = false
				want = slices.Insert(want, len(want)-1, "ready")
			}
			resp, err := td.c.Launch(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if !req.Detach {
				// The program starts when its client attaches.
				in, out, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer in.Close()
				defer out.Close()
				null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer null.Close()
				attached := make(chan error, 1)
				go func() {
					_, err := console.Attach(resp.ShimSocket, in, null, null, console.AttachOptions{NoSignals: true})
					attached <- err
				}()
				defer func() {
					if err := <-attached; err != nil {
						t.Errorf("attach: %v", err)
					}
				}()
			}
			var l *api.Launch
			waitFor(t, "launch running", func() bool {
				l, err = td.c.Get(ctx, resp.ID)
				return err == nil && l.State == api.StateRunning
			})
			checkStages := func(what string) {
				t.Helper()
				var got []string
				for _, s := range l.Stages {
					got = append(got, s.Name)
					if s.Duration < 0 {
						t.Errorf("stage %s: duration %v", s.Name, s.Duration)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("stages of the %s launch %v, want %v", what, got, want)
				}
			}
			checkStages("running")
			if _, err := td.c.Stop(ctx, resp.ID); err != nil {
				t.Fatal(err)
			}
			// Once committed, its end's stages follow its start's.
			want = append(want, "box", "end-brokers", "box-init-exit", "work-removal")
			waitFor(t, "the launch's final record", func() bool {
				l, err = td.c.Get(ctx, resp.ID)
				return err == nil && l.State != api.StateRunning && len(l.Stages) == len(want)
			})
			checkStages("ended")
		})
	}
}

// TestBadSessionIDRefused: the daemon checks a session id in the path as the CLI does
// (api.CheckSessionID), whatever client sends it; an empty id reached the collection's route.
func TestBadSessionIDRefused(t *testing.T) {
	td := startDaemon(t, nil)
	ctx := context.Background()
	for _, id := range []string{"", "s_", "../..", "s_zzzzzzzzzzzzzzzz", "s_0123456789abcdef0"} {
		err := td.c.RevokeSession(ctx, id)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != api.CodeBadRequest || !strings.Contains(ae.Message, "session id") {
			t.Errorf("revoke session %q: %v; want a bad_request naming the session id", id, err)
		}
	}
	err := td.c.RevokeSession(ctx, "s_0123456789abcdef")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeNotFound {
		t.Errorf("a well-formed id no session has: %v; want not found", err)
	}
}

// TestBadLaunchIDRefused (review 16, F7): the daemon checks a launch id in the path as the
// CLI does (api.CheckLaunchID), whatever client sends it: an answer that names the launch id
// and what one looks like (bad_request), never another route's or an internal error.
func TestBadLaunchIDRefused(t *testing.T) {
	td := startDaemon(t, nil)
	ctx := context.Background()
	for _, id := range []string{"abc", "zzzz", "ABCD", "../..", "abcd/stop", strings.Repeat("a", 33)} {
		_, err := td.c.Changes(ctx, id)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != api.CodeBadRequest || !strings.Contains(ae.Message, "launch id") {
			t.Errorf("changes %q: %v; want a bad_request naming the launch id", id, err)
		}
		if _, err := td.c.Stop(ctx, id); !errors.As(err, &ae) || ae.Code != api.CodeBadRequest {
			t.Errorf("stop %q: %v; want a bad_request", id, err)
		}
	}
	if _, err := td.c.Get(ctx, "abcd"); !errors.As(err, new(*api.Error)) || !strings.Contains(err.Error(), "no launch abcd") {
		t.Errorf("a well-formed id no launch has: %v; want not found", err)
	}
}

// TestIntegrityStateSavedBeforeRecord guards the order of a launch's integrity state and its
// record: the state (what a restarted daemon resumes the watch and the check at exit from) is
// written beside the stages after the integrity broker's, and the launch is recorded, and its
// program started, only once it is on disk. The hook holds the write back until the launch is
// answered (or 5 s have passed: a launch that waits for the write is answered after them), so
// that a launch that did not wait for it is answered with no state in its directory.
func TestIntegrityStateSavedBeforeRecord(t *testing.T) {
	t.Parallel()
	var held atomic.Int32
	answered := make(chan struct{})
	td := startDaemonOpts(t, Options{brokers: brokerHooks{beforeIntegritySave: func(string) {
		held.Add(1)
		select {
		case <-answered:
		case <-time.After(5 * time.Second):
		}
	}}})
	ctx := context.Background()
	resp, err := td.c.Launch(ctx, sleepRequest(t, td.work))
	close(answered)
	if err != nil {
		t.Fatal(err)
	}
	defer td.c.Stop(ctx, resp.ID)
	if held.Load() != 1 {
		t.Fatalf("the integrity state's save was held %d times, want 1", held.Load())
	}
	st, err := integrity.Load(filepath.Join(launchdir.Dir(td.runtime, resp.ID), launchdir.IntegrityFile))
	if err != nil {
		t.Fatalf("the launch was answered before its integrity state was saved: %v", err)
	}
	if st.Workspace != td.work {
		t.Errorf("saved state's workspace %q, want %q", st.Workspace, td.work)
	}
}

// TestSpareIdleCPUs: an interval needs one CPU's worth of idle time, and on a one-CPU machine
// 80 % of it (docs/internals.md says so).
func TestSpareIdleCPUs(t *testing.T) {
	for cpus, want := range map[int]float64{1: 0.8, 2: 1, 64: 1} {
		if got := spareIdleCPUs(cpus); got != want {
			t.Errorf("spareIdleCPUs(%d) = %v, want %v", cpus, got, want)
		}
	}
}
