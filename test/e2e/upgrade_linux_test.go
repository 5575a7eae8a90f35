package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

// TestRestartDaemonsAfterUpgrade runs the package's restart-daemons (what the postinst runs on
// an upgrade) against a real daemon: one that runs the installed binary is left alone; once the
// binary is replaced as dpkg replaces it (a new file renamed over it), the daemon that still
// runs the old one is stopped, its box keeps running, and the next agentbox run starts a daemon
// of the new binary that re-adopts the box.
func TestRestartDaemonsAfterUpgrade(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	src, err := filepath.Abs("../../packaging/scripts/restart-daemons")
	if err != nil {
		t.Fatal(err)
	}
	// An installation of its own: the CLI, the daemon binary and the box helper in one folder.
	inst := filepath.Join(e.Root, "inst")
	os.Mkdir(inst, 0o755)
	for _, name := range []string{"agentbox", "agentbox-daemon", "agentbox-box"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(agentboxBin), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(inst, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cli, daemon := filepath.Join(inst, "agentbox"), filepath.Join(inst, "agentbox-daemon")
	ab := func(args ...string) Result {
		t.Helper()
		c := e.Command(t.Context(), args...)
		c.Path, c.Args[0] = cli, cli
		return e.RunCmd(c)
	}
	restart := func() Result {
		t.Helper()
		// The environment's runtime directory is not beneath /run/user (as a user's
		// XDG_RUNTIME_DIR elsewhere, or the /tmp/agentbox-UID fallback): the script finds the
		// daemon by its executable. Before, it read /run/user/*/agentbox/daemon.pid only and
		// missed it.
		c := exec.CommandContext(t.Context(), "sh", src, daemon)
		return e.RunCmd(c)
	}
	if r := ab("daemon", "--detach"); r.Code != 0 {
		t.Fatalf("daemon --detach: exit %d: %s", r.Code, r.Stderr)
	}
	r := ab("run", "-d", "sleep", "--", "600")
	id := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || len(id) != 32 {
		t.Fatalf("run -d: exit %d: %q %q", r.Code, r.Stdout, r.Stderr)
	}
	e.WaitLaunch(id, "running", func(l api.Launch) bool { return l.State == api.StateRunning })
	old := e.DaemonPid()

	// Not upgraded: nothing to do.
	if r := restart(); r.Code != 0 || r.Stdout != "" {
		t.Errorf("restart-daemons before the upgrade: exit %d: %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if syscall.Kill(old, 0) != nil {
		t.Fatal("restart-daemons stopped a daemon of the installed binary")
	}

	// The upgrade: a new daemon binary renamed over the old one.
	b, err := os.ReadFile(daemon)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(daemon+".dpkg-new", b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(daemon+".dpkg-new", daemon); err != nil {
		t.Fatal(err)
	}
	r = restart()
	if r.Code != 0 || !strings.Contains(r.Stdout, "stopped the daemon of uid "+itoa(os.Getuid())+" (pid "+itoa(old)+"), which ran the previous version") {
		t.Errorf("restart-daemons after the upgrade: exit %d: %q %q", r.Code, r.Stdout, r.Stderr)
	}
	e.waitDaemonGone(t, old)
	// The next run starts the new daemon, which re-adopts the box.
	if r := ab("run", "true"); r.Code != 0 {
		t.Fatalf("run true after the upgrade: exit %d: %s", r.Code, r.Stderr)
	}
	if l := e.WaitLaunch(id, "running under the new daemon", func(l api.Launch) bool { return l.State == api.StateRunning }); l.ID != id {
		t.Errorf("launch %s lost", id)
	}
	if np := e.DaemonPid(); np == 0 || np == old {
		t.Errorf("no new daemon (pid file says %d)", np)
	}
	if exe, _ := os.Readlink("/proc/" + itoa(e.DaemonPid()) + "/exe"); exe != daemon {
		t.Errorf("the new daemon runs %q, want the upgraded %s", exe, daemon)
	}
}
