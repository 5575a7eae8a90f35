package readiness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/readiness"
)

// helpers are extra entry points of the test binary (see TestMain).
var helpers = map[string]func([]string) int{
	"probe-helper":          probeHelper,
	"seccomp-probe-helper":  seccompProbeHelper,
	"userns-daemon-helper":  usernsDaemonHelper,
	"launch-helper":         launchHelper,
	"smoke-daemon-helper":   smokeDaemonHelper,
	"no-landlock-then-exec": noLandlockThenExec,
}

// probeGuard bounds a probe in tests so that a broken one fails instead of hanging; it is not
// a timing assertion.
const probeGuard = 2 * time.Minute

// testDirs returns a runtime directory (0700) and a home for one test.
func testDirs(t testing.TB) (runtime, home string) {
	t.Helper()
	base := shortTempDir(t)
	runtime = filepath.Join(base, "run")
	home = filepath.Join(base, "home")
	for _, d := range []string{runtime, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return runtime, home
}

// shortTempDir is a temporary directory with a short path: unix socket paths live under it.
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "rd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func probe(t testing.TB, engine string, mod func(*readiness.ProbeOptions)) *readiness.Result {
	t.Helper()
	rt, home := testDirs(t)
	o := readiness.ProbeOptions{Engine: engine, RuntimeDir: rt, Home: home}
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeGuard)
	defer cancel()
	return readiness.Probe(ctx, o)
}

func requireBwrap(t testing.TB) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skipf("bwrap is not installed: %v", err)
	}
}

func engines(t *testing.T, f func(t *testing.T, engine string)) {
	for _, e := range []string{"native", "bwrap"} {
		t.Run(e, func(t *testing.T) {
			if e == "bwrap" {
				requireBwrap(t)
			}
			f(t, e)
		})
	}
}

func logFacts(t testing.TB, res *readiness.Result) {
	t.Helper()
	for _, f := range res.Facts {
		if !f.OK {
			t.Logf("✗ %s: %s", f.Name, f.Detail)
		}
	}
}

func TestProbe(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, engine string) {
		t.Parallel()
		res := probe(t, engine, nil)
		logFacts(t, res)
		if !res.OK() {
			t.Fatalf("probe failed: %v", res.Err)
		}
		if len(res.Facts) < 35 {
			t.Errorf("only %d facts", len(res.Facts))
		}
		for _, f := range res.Facts {
			if !f.OK {
				t.Errorf("fact %s not ok in a passing probe", f.Name)
			}
		}
	})
}

// TestProbeNoticesAWeakenedPlan weakens the production plan shape in one way at a time; the
// requirements still come from the unweakened plan, and the probe must fail on the right fact.
func TestProbeNoticesAWeakenedPlan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fact string
		weaken     func(p *plan.Plan)
	}{
		{"home ssh bound", "secrets.ssh_canary_unreadable", func(p *plan.Plan) {
			ssh := filepath.Join(p.Home, ".ssh")
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountBind, Source: ssh, Target: ssh, ReadOnly: true})
		}},
		{"host network", "namespaces.net", func(p *plan.Plan) { p.Network.Egress = plan.EgressAllow }},
		{"gui variable passed", "gui.environment_unset", func(p *plan.Plan) { p.Env = append(p.Env, "DISPLAY=:0") }},
		{"host socket bound", "gui.session_sockets_unreachable", func(p *plan.Plan) {
			sock := filepath.Join(filepath.Dir(p.RunDir), "host.sock")
			p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountBind, Source: sock, Target: sock, ReadOnly: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			engines(t, func(t *testing.T, engine string) {
				t.Parallel()
				res := probe(t, engine, func(o *readiness.ProbeOptions) { o.ModifyPlan = tc.weaken })
				if res.OK() {
					t.Fatal("the probe of a weakened box passed")
				}
				found := false
				for _, f := range res.Facts {
					if f.Name == tc.fact {
						found = true
						if f.OK {
							t.Errorf("fact %s passed: %s", f.Name, f.Detail)
						}
					}
				}
				if !found {
					t.Errorf("no fact %s (probe error %v)", tc.fact, res.Err)
				}
			})
		})
	}
}

func TestAttestRefusesArguments(t *testing.T) {
	out, err := exec.Command("/proc/self/exe", readiness.AttestCommand, "--extra").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "takes no arguments") {
		t.Fatalf("attester with an argument: %v, %q", err, out)
	}
}

func TestSquattedRuntimeRefused(t *testing.T) {
	t.Run("lock file of another uid", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("making a file of another uid needs root")
		}
		rt, home := testDirs(t)
		lock := filepath.Join(rt, readiness.LockFile)
		if err := os.WriteFile(lock, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(lock, 1001, 1001); err != nil {
			t.Fatal(err)
		}
		res := readiness.Probe(context.Background(), readiness.ProbeOptions{Engine: "native", RuntimeDir: rt, Home: home})
		if res.OK() || res.Err.Reason != readiness.ReasonRuntimeDirRefused || !strings.Contains(res.Err.Detail, "uid 1001") {
			t.Fatalf("probe with a squatted lock: %v", res.Err)
		}
	})
	t.Run("runtime dir of another uid", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("making a directory of another uid needs root")
		}
		rt, home := testDirs(t)
		if err := os.Chown(rt, 1001, 1001); err != nil {
			t.Fatal(err)
		}
		res := readiness.Probe(context.Background(), readiness.ProbeOptions{Engine: "native", RuntimeDir: rt, Home: home})
		if res.OK() || res.Err.Reason != readiness.ReasonRuntimeDirRefused {
			t.Fatalf("probe in a squatted runtime dir: %v", res.Err)
		}
	})
	t.Run("runtime dir open to others", func(t *testing.T) {
		rt, home := testDirs(t)
		if err := os.Chmod(rt, 0o777); err != nil {
			t.Fatal(err)
		}
		res := readiness.Probe(context.Background(), readiness.ProbeOptions{Engine: "native", RuntimeDir: rt, Home: home})
		if res.OK() || res.Err.Reason != readiness.ReasonRuntimeDirRefused {
			t.Fatalf("probe in a world-writable runtime dir: %v", res.Err)
		}
	})
}

// helperResult is what probe-helper prints.
type helperResult struct {
	OK      bool   `json:"ok"`
	Reason  string `json:"reason,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Overlap string `json:"overlap,omitempty"`
}

// probeHelper runs one probe in its own process: probe-helper RUNTIME HOME ENGINE [die]. With
// "die" it kills itself with SIGKILL once the box has started. It checks, while its box runs,
// that no other probe's directory exists in the shared runtime directory (probes serialize).
func probeHelper(args []string) int {
	if len(args) < 3 {
		return 2
	}
	var overlap string
	o := readiness.ProbeOptions{Engine: args[2], RuntimeDir: args[0], Home: args[1]}
	o.AfterStart = func() {
		ents, err := os.ReadDir(filepath.Join(args[0], readiness.ProbesDir))
		if err != nil || len(ents) != 1 {
			overlap = fmt.Sprintf("%d probe directories at once (%v)", len(ents), err)
		}
		if len(args) > 3 && args[3] == "die" {
			// Stop the shim first, so that it cannot hang the box up when this prober dies:
			// the box keeps running, as it would if both had been killed at once. The shim is
			// stopped only once every one of its threads is: kill(2) returns when SIGSTOP is
			// queued, the kernel wakes one thread to take it, and that thread stops the others
			// when it runs. Meanwhile the others run on, and under load one of them saw this
			// prober's console connection close and sent the box SIGHUP, which ended it
			// ("the killed probe's box should still run", bwrap, in a .ci/run).
			for _, e := range ents {
				var ref struct{ Pid int }
				if b, err := os.ReadFile(filepath.Join(args[0], readiness.ProbesDir, e.Name(), "probe-shim.json")); err == nil && json.Unmarshal(b, &ref) == nil && ref.Pid > 0 {
					syscall.Kill(ref.Pid, syscall.SIGSTOP)
					if err := waitStopped(ref.Pid, probeGuard); err != nil {
						fmt.Fprintf(os.Stderr, "stop the probe's shim: %v\n", err)
						os.Exit(3)
					}
				}
			}
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeGuard)
	defer cancel()
	res := readiness.Probe(ctx, o)
	hr := helperResult{OK: res.OK(), Overlap: overlap}
	if res.Err != nil {
		hr.Reason, hr.Detail = string(res.Err.Reason), res.Err.Detail
	}
	json.NewEncoder(os.Stdout).Encode(hr)
	return 0
}

// waitStopped waits until every thread of process pid is stopped (state T), at most max.
func waitStopped(pid int, max time.Duration) error {
	deadline := time.Now().Add(max)
	for {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		var running []string
		for _, e := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, e.Name()))
			if err != nil {
				continue // the thread has ended
			}
			if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] != "T" {
				running = append(running, e.Name()+" "+f[0])
			}
		}
		if len(running) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("threads of process %d not stopped after %v: %v", pid, max, running)
		}
		time.Sleep(time.Millisecond)
	}
}

func runProbeHelper(t testing.TB, args ...string) helperResult {
	t.Helper()
	cmd := exec.Command("/proc/self/exe", append([]string{"probe-helper"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var hr helperResult
	if err != nil || json.Unmarshal(out, &hr) != nil {
		t.Fatalf("probe-helper %v: %v, %q, %s", args, err, out, stderr.Bytes())
	}
	return hr
}

// TestProbesSerializeAcrossProcesses runs probes of separate processes at once on one runtime
// directory: each checks, while its box runs, that it is the only probe.
func TestProbesSerializeAcrossProcesses(t *testing.T) {
	t.Parallel()
	rt, home := testDirs(t)
	var wg sync.WaitGroup
	results := make([]helperResult, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			engine := "native"
			if i%2 == 1 {
				if _, err := exec.LookPath("bwrap"); err == nil {
					engine = "bwrap"
				}
			}
			results[i] = runProbeHelper(t, rt, home, engine)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if !r.OK || r.Overlap != "" {
			t.Errorf("probe %d: %+v", i, r)
		}
	}
}

// TestReclaimAfterKilledProbe kills a prober once its box runs, then checks that the next
// probe reclaims its shim, its box (every process of its pid namespace), its directory and the
// canary.
func TestReclaimAfterKilledProbe(t *testing.T) {
	t.Parallel()
	engines(t, func(t *testing.T, engine string) {
		t.Parallel()
		rt, home := testDirs(t)
		cmd := exec.Command("/proc/self/exe", "probe-helper", rt, home, engine, "die")
		var helperErr bytes.Buffer
		cmd.Stderr = &helperErr
		if err := cmd.Run(); cmd.ProcessState == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the prober was not killed: %v, stderr %s", err, helperErr.Bytes())
		}
		ents, err := os.ReadDir(filepath.Join(rt, readiness.ProbesDir))
		if err != nil || len(ents) != 1 {
			t.Fatalf("leftovers: %v, %v", ents, err)
		}
		dir := filepath.Join(rt, readiness.ProbesDir, ents[0].Name())
		var box struct {
			Pid   int    `json:"pid"`
			Start uint64 `json:"start"`
			PidNS uint64 `json:"pidNS"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, "probe-box.json")); err != nil || json.Unmarshal(b, &box) != nil || box.Pid == 0 {
			t.Fatalf("leftover box record: %v", err)
		}
		boxAlive := func() bool {
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", box.Pid))
			if err != nil {
				return false
			}
			f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
			return len(f) > 19 && f[19] == fmt.Sprint(box.Start) && f[0] != "Z" && f[0] != "X"
		}
		if !boxAlive() {
			shimLog, _ := os.ReadFile(filepath.Join(dir, "shim.log"))
			t.Fatalf("the killed probe's box should still run; its shim's log:\n%s", shimLog)
		}
		// Pin the old box's pid namespace, so that the check below cannot be fooled by a new
		// namespace reusing its inode number.
		nsfd, err := os.Open(fmt.Sprintf("/proc/%d/ns/pid", box.Pid))
		if err != nil {
			t.Fatal(err)
		}
		defer nsfd.Close()
		if _, err := os.Stat(filepath.Join(home, ".ssh", readiness.CanaryName)); err != nil {
			t.Fatalf("the killed probe's canary: %v", err)
		}

		var log bytes.Buffer
		res := readiness.Probe(context.Background(), readiness.ProbeOptions{Engine: engine, RuntimeDir: rt, Home: home,
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if !res.OK() {
			t.Fatalf("next probe: %v\n%s", res.Err, log.Bytes())
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the killed probe's directory remains: %v", err)
		}
		if boxAlive() {
			t.Errorf("the killed probe's box (PID 1 = host pid %d) still runs", box.Pid)
		}
		if left, err := ns.Remaining(box.PidNS); err != nil {
			t.Error(err)
		} else {
			// A zombie has ended: the killed box's PID 1 may wait for the host's reaper.
			for _, pid := range left {
				if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
					f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
					if len(f) > 0 && f[0] != "Z" && f[0] != "X" {
						t.Errorf("process %d of the killed probe's box still runs (%s)", pid, f[0])
					}
				}
			}
		}
		if _, err := os.Stat(filepath.Join(home, ".ssh", readiness.CanaryName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the canary remains: %v", err)
		}
	})
}

// TestEngineMissingThenInstalled removes bwrap from PATH: the manager reports engine_missing
// and retries; once bwrap is back on PATH it becomes ready by itself, without a restart.
func TestEngineMissingThenInstalled(t *testing.T) {
	requireBwrap(t)
	real, _ := exec.LookPath("bwrap")
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	rt, home := testDirs(t)
	t.Setenv("HOME", home)
	m := readiness.NewManager(readiness.Options{
		Config:     func() config.Config { return config.Config{Engine: "bwrap"} },
		RuntimeDir: rt, StateDir: t.TempDir(), RetryMin: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		ProbeTimeout: probeGuard,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Start(ctx)
	wctx, wcancel := context.WithTimeout(ctx, probeGuard)
	defer wcancel()
	st, err := m.Wait(wctx, func(r api.Readiness) bool { return r.State == "unavailable" })
	if err != nil || st.Reason != string(readiness.ReasonEngineMissing) {
		t.Fatalf("without bwrap: %+v, %v", st, err)
	}
	if err := m.Admit(ctx); err == nil || !strings.Contains(err.Error(), "engine_missing") {
		t.Fatalf("Admit without bwrap = %v", err)
	}
	if err := os.Symlink(real, filepath.Join(bin, "bwrap")); err != nil {
		t.Fatal(err)
	}
	st, err = m.Wait(wctx, func(r api.Readiness) bool { return r.State == "ready" })
	if err != nil {
		t.Fatalf("after installing bwrap: %+v, %v", st, err)
	}
	if err := m.Admit(ctx); err != nil {
		t.Fatalf("Admit once ready = %v", err)
	}
}
