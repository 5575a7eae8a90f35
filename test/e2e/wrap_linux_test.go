package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/internal/wrap"
)

// fakeAgent is a stand-in for a managed agent (a generic-profile program): it says which user
// namespace it runs in, then acts on its first argument. "trap" waits in short sleeps: dash runs
// a trap between commands, so a Ctrl+C that reaches the shell before it forks a long sleep (and
// so misses the sleep) would be acted on only when that sleep ends (TestWrapTerminal/CtrlC
// failed so in CI, as abuser).
const fakeAgent = `#!/bin/sh
echo "fakeagent-userns=$(readlink /proc/self/ns/user)"
case "$1" in
exit) exit "$2" ;;
trap) trap 'echo got-int; exit 3' INT; echo ready-$((2+2)); while :; do sleep 0.05; done ;;
size) echo size1=$(stty size); read x; echo size2=$(stty size) ;;
wait) sleep 1000 & wait ;;
esac
`

// hostUserNS is the test's own user namespace (the host's, for a process outside every box).
func hostUserNS(t *testing.T) string {
	t.Helper()
	ns, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// TestWrapTerminal types a wrapped command by its plain name in a real terminal, with the
// launcher first on PATH and the vendor's program behind it: it runs boxed (another user
// namespace) in the same terminal, gets the window size and its resize, Ctrl+C reaches it, and
// the shell sees the program's own exit code.
func TestWrapTerminal(t *testing.T) {
	e := NewEnv(t)
	wrapDir, vendorDir := filepath.Join(e.Root, "wrap"), filepath.Join(e.Root, "vendor")
	os.MkdirAll(vendorDir, 0o755)
	if err := os.WriteFile(filepath.Join(vendorDir, "fakeagent"), []byte(fakeAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("", "wrap", "install", "--prefix", wrapDir, "--program", "fakeagent"); r.Code != 0 {
		t.Fatalf("wrap install: exit %d: %s", r.Code, r.Stderr)
	}
	if !wrap.IsLauncher(filepath.Join(wrapDir, "fakeagent")) {
		t.Fatal("no launcher installed")
	}
	path := wrapDir + ":" + vendorDir + ":" + os.Getenv("PATH")
	for i, v := range e.Vars {
		if strings.HasPrefix(v, "PATH=") {
			e.Vars[i] = "PATH=" + path
		}
	}
	// The launcher execs the agentbox under test.
	if r := e.Run("", "wrap", "install", "--prefix", wrapDir, "--program", "fakeagent", "--agentbox", agentboxBin); r.Code != 0 {
		t.Fatalf("wrap install: exit %d: %s", r.Code, r.Stderr)
	}
	host := hostUserNS(t)
	m := e.Tmux(t)
	m.Type("command -v fakeagent")
	m.WaitFor(regexpQuote(filepath.Join(wrapDir, "fakeagent")))

	t.Run("ExitCode", func(t *testing.T) {
		m.step++
		tag := fmt.Sprintf("W%dW", m.step)
		m.Type("fakeagent exit 7; echo " + tag + "=$?")
		if got := m.Wait(tag); got != 7 {
			t.Errorf("wrapped command exited %d, want the program's 7", got)
		}
		ns := m.WaitFor(`fakeagent-userns=(\S+)`)[1]
		if ns == host {
			t.Errorf("the wrapped program ran in the host's user namespace %s: not boxed", ns)
		}
	})
	t.Run("CtrlC", func(t *testing.T) {
		m.step++
		tag := fmt.Sprintf("W%dW", m.step)
		m.Type("fakeagent trap; echo " + tag + "=$?")
		m.WaitFor("ready-4")
		m.Keys("C-c")
		if got := m.Wait(tag); got != 3 {
			t.Errorf("after Ctrl+C: exit %d, want 3 (from the program's trap)", got)
		}
		if !strings.Contains(m.Screen(), "got-int") {
			t.Errorf("the program's INT trap did not run:\n%s", m.Screen())
		}
	})
	t.Run("Resize", func(t *testing.T) {
		m.step++
		tag := fmt.Sprintf("W%dW", m.step)
		m.Type("fakeagent size; echo " + tag + "=$?")
		if got := m.WaitFor(`size1=(\d+ \d+)`)[1]; got != "24 80" {
			t.Errorf("initial size: %q, want \"24 80\"", got)
		}
		m.tmux("resize-window", "-t", "main", "-x", "100", "-y", "30")
		pane := strings.TrimSpace(m.tmux("display", "-p", "-t", "main", "#{pane_height} #{pane_width}"))
		m.Keys("Enter")
		if got := m.WaitFor(`size2=(\d+ \d+)`)[1]; got != pane {
			t.Errorf("size after the resize: %q, want %q", got, pane)
		}
		if code := m.Wait(tag); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
	if strings.Contains(m.Screen(), "agentbox:") {
		t.Errorf("agentbox printed an error of its own:\n%s", m.Screen())
	}
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestPackage builds the .deb, installs it with dpkg, runs a managed program by its plain name
// through the installed launcher (boxed, its own exit code), runs the vendor's program by its
// full path and sees the violation recorded and killed (posture terminate), then removes and
// purges the package and checks that nothing it installed is left. It changes the machine, so
// it runs only as root and only with AGENTBOX_PACKAGE_TEST=1 (.ci/run sets it).
func TestPackage(t *testing.T) {
	if os.Getenv("AGENTBOX_PACKAGE_TEST") != "1" {
		t.Skip("AGENTBOX_PACKAGE_TEST is not 1: this test installs a package system-wide (CI sets it)")
	}
	if os.Geteuid() != 0 {
		t.Skip("installing a package needs root")
	}
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("no dpkg on this machine")
	}
	if exec.Command("dpkg", "-s", "agentbox").Run() == nil {
		t.Skip("an agentbox package is installed already; not touching it")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		c := exec.Command(name, args...)
		c.Dir = root
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	deb := os.Getenv("AGENTBOX_DEB")
	if deb == "" {
		run("make", "package")
		debs, _ := filepath.Glob(filepath.Join(root, "dist", "agentbox_*.deb"))
		if len(debs) != 1 {
			t.Fatalf("make package made %v, want one .deb", debs)
		}
		deb = debs[0]
	}

	// Leave the machine as it was: an existing policy is put back, the package purged.
	const policy = "/etc/agentbox/policy.yaml"
	saved, savedErr := os.ReadFile(policy)
	_, etcErr := os.Stat("/etc/agentbox")
	vendorDir := "/opt/agentbox-package-test/bin"
	t.Cleanup(func() {
		if exec.Command("dpkg", "-s", "agentbox").Run() == nil {
			if out, err := exec.Command("dpkg", "-P", "agentbox").CombinedOutput(); err != nil {
				t.Errorf("cleanup: dpkg -P agentbox: %v\n%s", err, out)
			}
		}
		if savedErr == nil {
			os.MkdirAll("/etc/agentbox", 0o755)
			os.WriteFile(policy, saved, 0o644)
		}
		os.RemoveAll(filepath.Dir(vendorDir))
	})

	out := run("dpkg", "-i", "--force-confnew", deb)
	t.Logf("dpkg -i:\n%s", out)
	installed := strings.Fields(run("dpkg-query", "-L", "agentbox"))
	for _, f := range []string{"/usr/bin/agentbox", "/usr/libexec/agentbox/agentbox-daemon", "/usr/libexec/agentbox/agentbox-box", "/usr/libexec/agentbox/restart-daemons", "/usr/lib/systemd/user/agentbox.service", "/usr/lib/systemd/system/agentbox-system.service",
		"/etc/apparmor.d/agentbox", policy, "/usr/share/bash-completion/completions/agentbox", "/usr/share/man/man1/agentbox-wrap.1.gz"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the package did not install %s: %v", f, err)
		}
	}
	unit, _ := os.ReadFile("/usr/lib/systemd/user/agentbox.service")
	if !bytes.Contains(unit, []byte("\nKillMode=process\n")) {
		t.Error("the user unit does not keep boxes alive across daemon restarts (KillMode=process)")
	}
	// The postinst rendered the example policy's launchers.
	for _, name := range []string{"claude", "codex"} {
		if !wrap.IsLauncher(filepath.Join(wrap.DefaultPrefix, name)) {
			t.Errorf("postinst did not render the launcher of %s", name)
		}
	}

	// A vendor program and a policy managing it (terminate), and the real claude when there.
	if err := os.MkdirAll(vendorDir, 0o755); err != nil {
		t.Fatal(err)
	}
	vendor := filepath.Join(vendorDir, "fakeagent")
	if err := os.WriteFile(vendor, []byte(fakeAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	pol := "containment:\n  violations: terminate\n  programs:\n    - name: fakeagent\n"
	realClaude := ""
	agents := cmp.Or(os.Getenv(testenv.AgentsDirEnv), testenv.DefaultAgentsDir)
	if p, err := filepath.EvalSymlinks(filepath.Join(agents, "bin", "claude")); err == nil {
		// The policy manages a private copy of the real claude, never the shared one: the
		// daemon's scanner terminates every native run of a managed program of its user on
		// the machine, and as root that was the real claude that tests of other packages
		// run unboxed at the same time (internal/profile TestClaudeWiringBeatsWorkspaceSettings
		// "signal: killed" in three .ci/runs). The scanner matches the executable's inode, so
		// nothing but this copy is managed.
		realClaude = filepath.Join(vendorDir, "claude")
		if err := copyExecutable(p, realClaude); err != nil {
			t.Fatal(err)
		}
		pol += "    - name: claude\n      path: " + realClaude + "\n"
	}
	if err := os.WriteFile(policy, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	out = run("/usr/bin/agentbox", "wrap", "install")
	t.Logf("wrap install:\n%s", out)
	for _, name := range []string{"codex", "opencode"} {
		if _, err := os.Stat(filepath.Join(wrap.DefaultPrefix, name)); err == nil {
			t.Errorf("the launcher of %s (no longer in the policy) was not removed", name)
		}
	}

	e := NewEnv(t)
	for i, v := range e.Vars {
		if strings.HasPrefix(v, "PATH=") {
			e.Vars[i] = "PATH=" + wrap.DefaultPrefix + ":" + vendorDir + ":" + os.Getenv("PATH")
		}
	}
	sh := func(line string) Result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, "sh", "-c", line)
		c.Env, c.Dir = e.Vars, e.Work
		return e.RunCmd(c)
	}
	t.Cleanup(func() {
		// Stop the daemon the launcher started (the installed agentbox) before the package goes.
		sh("/usr/bin/agentbox daemon stop")
	})

	// By its plain name, through the launcher: boxed, its own exit code.
	r := sh("fakeagent exit 42")
	if r.Code != 42 {
		t.Fatalf("fakeagent through the launcher: exit %d, want 42\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	host := hostUserNS(t)
	if !strings.Contains(r.Stdout, "fakeagent-userns=") || strings.Contains(r.Stdout, "fakeagent-userns="+host) {
		t.Errorf("the program did not run boxed (host user namespace %s): %q", host, r.Stdout)
	}
	if realClaude != "" {
		r := sh("claude --version")
		if r.Code != 0 || !strings.Contains(r.Stdout, "Claude Code") {
			t.Errorf("the real claude through the launcher: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
		}
	}

	// By its full path: native, a violation, killed under terminate.
	native := exec.Command(vendor, "wait")
	native.Env = e.Vars
	if err := native.Start(); err != nil {
		t.Fatal(err)
	}
	defer native.Process.Kill()
	r = sh("/usr/bin/agentbox wrap scan --json")
	if r.Code != 0 {
		t.Fatalf("wrap scan: exit %d: %s", r.Code, r.Stderr)
	}
	var v api.Violations
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil {
		t.Fatalf("wrap scan --json: %v: %s", err, r.Stdout)
	}
	var hit *api.Violation
	for i := range v.Found {
		if v.Found[i].Pid == native.Process.Pid {
			hit = &v.Found[i]
		}
	}
	if hit == nil {
		t.Fatalf("the native run (pid %d) was not reported: %+v", native.Process.Pid, v)
	}
	if hit.Program != "fakeagent" || hit.Action != api.ViolationTerminated || hit.PPid != os.Getpid() {
		t.Errorf("violation %+v: want fakeagent, terminated, parent %d", hit, os.Getpid())
	}
	err = native.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the native run was not killed: %v", err)
	}
	r = sh("/usr/bin/agentbox info --json")
	var info api.Info
	if json.Unmarshal([]byte(r.Stdout), &info) != nil || info.Violations == nil || info.Violations.Terminated < 1 || info.Violations.Posture != "terminate" {
		t.Errorf("agentbox info does not show the violation: %s", r.Stdout)
	}
	if info.BoxBinary != "/usr/libexec/agentbox/agentbox-box" {
		t.Errorf("the installed daemon starts boxes from %q, want the packaged helper /usr/libexec/agentbox/agentbox-box", info.BoxBinary)
	}
	sh("/usr/bin/agentbox daemon stop")

	// Removal takes away everything but the conffiles; purge takes those too.
	run("dpkg", "-r", "agentbox")
	conffiles := map[string]bool{policy: true, "/etc/apparmor.d/agentbox": true}
	for _, f := range installed {
		st, err := os.Lstat(f)
		if err != nil || st.IsDir() {
			continue
		}
		if !conffiles[f] {
			t.Errorf("dpkg -r left %s", f)
		}
	}
	for _, f := range []string{filepath.Join(wrap.DefaultPrefix, "fakeagent"), filepath.Join(wrap.DefaultPrefix, "claude"),
		"/etc/systemd/user/default.target.wants/agentbox.service", "/etc/systemd/system/multi-user.target.wants/agentbox-system.service"} {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("dpkg -r left %s", f)
		}
	}
	run("dpkg", "-P", "agentbox")
	for f := range conffiles {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("dpkg -P left %s", f)
		}
	}
	if _, err := os.Stat("/etc/agentbox"); err == nil && etcErr != nil {
		t.Error("dpkg -P left /etc/agentbox")
	}
}

// TestAttackWrapUntrustedAgentbox guards issue 21, finding 15: as root, wrap install
// --agentbox accepted a binary an ordinary user owns for launchers every user runs. A binary
// that someone else could replace — owned by another user, or in a folder others can write —
// is refused, with the reason; the genuine one is accepted.
func TestAttackWrapUntrustedAgentbox(t *testing.T) {
	e := NewEnv(t)
	data, err := os.ReadFile(agentboxBin)
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(e.Root, "wrap")
	install := func(ab string) Result {
		return e.Run("", "wrap", "install", "--prefix", prefix, "--program", "fakeagent", "--agentbox", ab)
	}
	// A folder anyone can write to (not sticky), whoever runs it.
	open := filepath.Join(e.Root, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	inOpen := filepath.Join(open, "agentbox")
	if err := os.WriteFile(inOpen, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := install(inOpen); r.Code == 0 || !strings.Contains(r.Stderr, "writable by group or others") {
		t.Errorf("--agentbox in a world-writable folder: exit %d\n%s", r.Code, r.Stderr)
	}
	if wrap.IsLauncher(filepath.Join(prefix, "fakeagent")) {
		t.Fatal("a launcher was installed for an untrusted --agentbox")
	}
	// As root: a binary an ordinary user owns.
	if os.Geteuid() == 0 {
		name := os.Getenv("AGENTBOX_TEST_USER")
		if name == "" {
			name = "abuser" // scripts/test.sh's ordinary user
		}
		u, err := user.Lookup(name)
		if err != nil {
			t.Skipf("no ordinary user %s to own the binary: %v", name, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		dir := filepath.Join(e.Root, "userbin")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		owned := filepath.Join(dir, "agentbox")
		if err := os.WriteFile(owned, data, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(owned, uid, -1)
		if r := install(owned); r.Code == 0 || !strings.Contains(r.Stderr, "neither root nor you") {
			t.Errorf("as root, --agentbox owned by %s: exit %d\n%s", u.Username, r.Code, r.Stderr)
		}
		os.Chown(owned, 0, -1)
		os.Chown(dir, uid, -1)
		if r := install(owned); r.Code == 0 || !strings.Contains(r.Stderr, "neither root nor you") {
			t.Errorf("as root, --agentbox in a folder owned by %s: exit %d\n%s", u.Username, r.Code, r.Stderr)
		}
		if wrap.IsLauncher(filepath.Join(prefix, "fakeagent")) {
			t.Fatal("a launcher was installed for an untrusted --agentbox")
		}
	}
	if r := install(agentboxBin); r.Code != 0 || !wrap.IsLauncher(filepath.Join(prefix, "fakeagent")) {
		t.Errorf("--agentbox %s: exit %d\n%s", agentboxBin, r.Code, r.Stderr)
	}
}

// TestAttackRootWrapReadsNoUserConfig guards issue 21, finding 15: root-run wrap read the
// invoking user's configuration layer (through sudo's environment). It reads the system
// policy only: a user config that does not even parse changes nothing.
func TestAttackRootWrapReadsNoUserConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the system policy must be root-owned")
	}
	e := NewEnv(t)
	policy := filepath.Join(e.Root, "policy.yaml")
	if err := os.WriteFile(policy, []byte("containment:\n  programs:\n    - name: fakeagent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(e.Config, "agentbox", "config.yaml")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	if err := os.WriteFile(cfg, []byte("egress: [not, a, mode\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(e.Root, "wrap")
	r := e.Run("", "wrap", "install", "--prefix", prefix, "--policy", policy, "--agentbox", agentboxBin)
	if r.Code != 0 || strings.Contains(r.Stderr, cfg) || !wrap.IsLauncher(filepath.Join(prefix, "fakeagent")) {
		t.Errorf("root wrap install with a broken user config: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
