package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/attack"
)

// AttackHost sets up the attack targets for this environment and removes them when the test
// ends. The client's environment gets the fake secrets.
func (e *Env) AttackHost() *attack.Host {
	e.t.Helper()
	outside := filepath.Join(e.Root, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		e.t.Fatal(err)
	}
	h, err := attack.SetUp(attack.HostOptions{
		Home: e.Home, XDGRuntimeDir: e.Runtime, RuntimeDir: e.RuntimeDir(), Workspace: e.Work,
		OutsideDirs: []string{outside, e.Root}, Netns: true, Sessions: cliSessions{e},
	})
	if err != nil {
		e.t.Fatalf("attack targets: %v", err)
	}
	e.t.Cleanup(func() {
		if err := h.Close(); err != nil {
			e.t.Errorf("remove attack targets: %v", err)
		}
	})
	e.Vars = append(e.Vars, h.Env()...)
	return h
}

// ProbeCmd returns the command that runs the named attempts in a box through agentbox, with
// an extra descriptor (a host secret) open in the client.
func (e *Env) ProbeCmd(ctx context.Context, h *attack.Host, extra []string, names ...string) *exec.Cmd {
	e.t.Helper()
	return e.probeCmdIn(ctx, h, h.Targets, extra, names...)
}

// probeCmdIn is ProbeCmd with targets of the caller's (run from targets.Workspace).
func (e *Env) probeCmdIn(ctx context.Context, h *attack.Host, targets attack.Targets, extra []string, names ...string) *exec.Cmd {
	e.t.Helper()
	args, err := attack.ProbeArgs(targets, names...)
	if err != nil {
		e.t.Fatal(err)
	}
	c := e.Command(ctx, append(append(append([]string{"run"}, extra...), agentboxBin, "--"), args...)...)
	if len(h.Targets.SecretFiles) > 0 {
		f, err := os.Open(h.Targets.SecretFiles[0])
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { f.Close() })
		c.ExtraFiles = []*os.File{f}
	}
	if targets.Workspace != "" {
		c.Dir = targets.Workspace
	}
	return c
}

// Probe runs one attempt in a box and returns its observation.
func (e *Env) Probe(h *attack.Host, name string) attack.Observation {
	e.t.Helper()
	return e.probeIn(h, h.Targets, name)
}

// probeIn is Probe with targets of the caller's.
func (e *Env) probeIn(h *attack.Host, targets attack.Targets, name string) attack.Observation {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := e.RunCmd(e.probeCmdIn(ctx, h, targets, nil, name))
	if r.Code != 0 {
		e.t.Fatalf("probe %s: agentbox exited %d\nstdout: %s\nstderr: %s", name, r.Code, r.Stdout, r.Stderr)
	}
	obs, err := attack.ParseReport([]byte(r.Stdout))
	if err != nil {
		e.t.Fatal(err)
	}
	o, ok := obs[name]
	if !ok {
		e.t.Fatalf("probe %s: no report\nstdout: %s\nstderr: %s", name, r.Stdout, r.Stderr)
	}
	return o
}

// TestAttack runs every attempt of the attack registry from inside a box, each in its own
// box and its own subtest (go test -run 'TestAttack/ptrace'): each must be refused, and leave
// nothing on the host.
func TestAttack(t *testing.T) {
	e := NewEnv(t)
	h := e.AttackHost()
	for _, a := range attack.All() {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			if why := h.Targets.Missing(a); why != "" {
				t.Skip(why)
			}
			env := *e
			env.t = t
			// Each attempt in a workspace of its own: the boxes run side by side.
			targets := h.Targets
			targets.Workspace = filepath.Join(e.Work, a.Name)
			if err := os.Mkdir(targets.Workspace, 0o755); err != nil {
				t.Fatal(err)
			}
			if a.Prepare != nil {
				if err := a.Prepare(targets.Workspace); err != nil {
					t.Fatal(err)
				}
			}
			o := env.probeIn(h, targets, a.Name)
			for _, ev := range o.Evidence {
				t.Log(ev)
			}
			err := a.Verdict(h, o)
			if errors.Is(err, attack.ErrSkipped) {
				t.Skip(err)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
}

// TestAttackProbeDetects shows that the probe can see a breach: with the host network
// (--egress allow), the host's loopback listener is reachable and the attempt says so. An
// attack test that cannot fail would prove nothing.
func TestAttackProbeDetects(t *testing.T) {
	e := NewEnv(t)
	h := e.AttackHost()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := e.RunCmd(e.ProbeCmd(ctx, h, []string{"--egress", "allow"}, "tcp-host-loopback"))
	if r.Code != 0 {
		t.Skipf("egress allow is not available here (exit %d): %s", r.Code, r.Stderr)
	}
	obs, err := attack.ParseReport([]byte(r.Stdout))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := attack.Lookup("tcp-host-loopback")
	o := obs[a.Name]
	if err := a.Verdict(h, o); err == nil {
		t.Fatalf("with the host network the attempt reported nothing: %v", o.Evidence)
	}
	if h.Accepted("tcp") == 0 {
		t.Errorf("the host listener counted no connection from a box on the host network")
	}
}

// pidNamespace returns the pid namespace link of a host process.
func pidNamespace(t *testing.T, pid int) string {
	t.Helper()
	l, err := os.Readlink("/proc/" + itoa(pid) + "/ns/pid")
	if err != nil {
		t.Fatalf("pid namespace of %d: %v", pid, err)
	}
	return l
}

// TestTreeCleanup checks on the host that a double-forked, setsid'd process started in a box
// is gone once the box has ended: when its program exits (attached run), and when it is
// stopped with `agentbox stop` (detached run).
func TestTreeCleanup(t *testing.T) {
	t.Run("ProgramExits", func(t *testing.T) {
		t.Parallel()
		e := NewEnv(t)
		h := e.AttackHost()
		o := e.Probe(h, "escape-tree")
		a, _ := attack.Lookup("escape-tree")
		if o.Facts["escapee"] == "" || o.Facts["escapee"] != o.Facts["escapee-sid"] {
			t.Fatalf("the escapee did not run in its own session: %v", o.Evidence)
		}
		if err := a.Verdict(h, o); err != nil {
			t.Error(err)
		}
	})
	t.Run("Stop", func(t *testing.T) {
		t.Parallel()
		e := NewEnv(t)
		id := e.Detach("sh", "--", "-c", `(setsid sleep 1001 &); exec sleep 1000`)
		l := e.WaitLaunch(id, "running", func(l api.Launch) bool { return l.State == api.StateRunning && l.BoxPid > 0 })
		ns := pidNamespace(t, l.BoxPid)
		// The escapee runs, in the box's pid namespace, as a session leader.
		eventually(t, "the setsid'd sleep running in the box", func() bool {
			pids, _ := attack.ProcessesIn(ns)
			for _, p := range pids {
				cmd, _ := os.ReadFile("/proc/" + itoa(p) + "/cmdline")
				if string(cmd) == "sleep\x001001\x00" && sessionID(p) == p {
					return true
				}
			}
			return false
		})
		r := e.Run("", "stop", id)
		if r.Code != 0 {
			t.Fatalf("agentbox stop: exit %d: %s", r.Code, r.Stderr)
		}
		if left, _ := attack.ProcessesIn(ns); len(left) > 0 {
			t.Errorf("after agentbox stop, processes of the box remain: %v", left)
		}
		if l, _ := e.Launch(id); l.State != api.StateExited || !l.Settled {
			t.Errorf("after stop: state %s settled %v", l.State, l.Settled)
		}
	})
}

// sessionID returns the session of a host process (0 when unknown).
func sessionID(pid int) int {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 4 {
		return 0
	}
	return atoi(f[3])
}

// cliSessions makes and revokes the pairing attempts' sessions with the CLI.
type cliSessions struct{ e *Env }

func (s cliSessions) Create() (string, string, error) {
	r := s.e.Run("", "session", "create", "--client", "attack", "--json")
	var c api.SessionCreated
	if r.Code != 0 {
		return "", "", errors.New("session create: " + r.Stderr)
	}
	if err := json.Unmarshal([]byte(r.Stdout), &c); err != nil {
		return "", "", err
	}
	return c.ID, c.Pairing, nil
}

func (s cliSessions) Revoke(id string) error {
	if r := s.e.Run("", "session", "revoke", id); r.Code != 0 {
		return errors.New("session revoke: " + r.Stderr)
	}
	return nil
}
