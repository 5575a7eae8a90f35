package enginetest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/plan"
)

// Run runs the conformance suite against the engine factory makes. Every test starts real
// boxes; the test binary must dispatch the engine's entry points (see Main).
func Run(t *testing.T, factory func() engine.Engine) {
	t.Run("ExitCodes", func(t *testing.T) { t.Parallel(); testExitCodes(t, factory) })
	t.Run("SignalExit", func(t *testing.T) { t.Parallel(); testSignalExit(t, factory) })
	t.Run("SignalForwarded", func(t *testing.T) { t.Parallel(); testSignalForwarded(t, factory) })
	t.Run("ProgramNotFound", func(t *testing.T) { t.Parallel(); testProgramNotFound(t, factory) })
	t.Run("ProgramNotExecutable", func(t *testing.T) { t.Parallel(); testProgramNotExecutable(t, factory) })
	t.Run("SetupFailure", func(t *testing.T) { t.Parallel(); testSetupFailure(t, factory) })
	t.Run("PipeStreams", func(t *testing.T) { t.Parallel(); testPipeStreams(t, factory) })
	t.Run("BinaryPassthrough", func(t *testing.T) { t.Parallel(); testBinaryPassthrough(t, factory) })
	t.Run("TTY", func(t *testing.T) { t.Parallel(); testTTY(t, factory) })
	t.Run("WorkspaceOwnership", func(t *testing.T) { t.Parallel(); testWorkspaceOwnership(t, factory) })
	t.Run("FoldersUnderDevShm", func(t *testing.T) { t.Parallel(); testFoldersUnderDevShm(t, factory) })
	t.Run("WritesOutsideWorkspace", func(t *testing.T) { t.Parallel(); testWritesOutside(t, factory) })
	t.Run("Namespaces", func(t *testing.T) { t.Parallel(); testNamespaces(t, factory) })
	t.Run("EgressAllowSharesNetwork", func(t *testing.T) { t.Parallel(); testEgressAllow(t, factory) })
	t.Run("LoopbackOnly", func(t *testing.T) { t.Parallel(); testLoopbackOnly(t, factory) })
	t.Run("Environment", func(t *testing.T) { t.Parallel(); testEnvironment(t, factory) })
	t.Run("NoInheritedFDs", func(t *testing.T) { t.Parallel(); testNoInheritedFDs(t, factory) })
	t.Run("Settlement", func(t *testing.T) { t.Parallel(); testSettlement(t, factory) })
	t.Run("CorePatternReadOnly", func(t *testing.T) { t.Parallel(); testCorePattern(t, factory) })
	t.Run("InitHiddenInProc", func(t *testing.T) { t.Parallel(); testInitHidden(t, factory) })
	t.Run("ProtectedPaths", func(t *testing.T) { t.Parallel(); testProtectedPaths(t, factory) })
	t.Run("RootRemapped", func(t *testing.T) { t.Parallel(); testRootRemapped(t, factory) })
	t.Run("RootBoxUIDNotShared", func(t *testing.T) { t.Parallel(); testRootBoxUIDNotShared(t, factory) })
	t.Run("LinkIntoBoundFolder", func(t *testing.T) { t.Parallel(); testLinkIntoBoundFolder(t, factory) })
}

// testLinkIntoBoundFolder: a plan's symlink (plan.MountSymlink) is made on the box's home tmpfs
// and leads into a host folder bound read-write beneath it (Claude Code's ~/.claude.json, a
// link to its file in the bound ~/.claude): a program that writes a new file beside where the
// link leads and renames it over that file, as Claude Code saves its config, replaces the
// host's file; the link itself is not on the host.
func testLinkIntoBoundFolder(t *testing.T, factory func() engine.Engine) {
	state := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, "cfg.json"), []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, _ := sh(t, `l="$HOME/.cfg.json"; t=$(readlink -f "$l") && echo "link=$(readlink "$l")" && echo new > "$t.tmp" && mv -T "$t.tmp" "$t" && cat "$l"`, func(in *plan.Input) {
		in.Brokers.Mounts = append(in.Brokers.Mounts,
			plan.Mount{Kind: plan.MountBind, Source: state, Target: TestHome + "/state"},
			plan.Mount{Kind: plan.MountSymlink, Source: "state/cfg.json", Target: TestHome + "/.cfg.json"})
	})
	r := RunBox(t, factory(), p, Options{})
	mustExec(t, r)
	if out := string(r.Stdout); r.Exit != 0 || out != "link=state/cfg.json\nnew\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want the link to state/cfg.json and the renamed file read through it", r.Exit, out, r.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(state, "cfg.json")); err != nil || string(b) != "new\n" {
		t.Errorf("the bound folder's file after the rename: %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 1 {
		t.Errorf("the bound folder holds %d entries, want only cfg.json", len(ents))
	}
}

func sh(t *testing.T, script string, mod func(*plan.Input)) (*plan.Plan, Dirs) {
	return NewPlan(t, "/bin/sh", []string{"-c", script}, mod)
}

func testExitCodes(t *testing.T, factory func() engine.Engine) {
	for _, code := range []int{0, 7, 125, 126, 127} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			p, _ := sh(t, fmt.Sprintf("exit %d", code), nil)
			r := RunBox(t, factory(), p, Options{})
			mustExec(t, r)
			if r.Exit != code {
				t.Errorf("exit = %d, want %d (stderr %q)", r.Exit, code, r.Stderr)
			}
		})
	}
}

func testSignalExit(t *testing.T, factory func() engine.Engine) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL, syscall.SIGUSR1} {
		t.Run(strconv.Itoa(int(sig)), func(t *testing.T) {
			t.Parallel()
			p, _ := sh(t, fmt.Sprintf("kill -%d $$; sleep 5", sig), nil)
			r := RunBox(t, factory(), p, Options{})
			mustExec(t, r)
			if want := 128 + int(sig); r.Exit != want {
				t.Errorf("exit = %d, want %d", r.Exit, want)
			}
		})
	}
}

func testSignalForwarded(t *testing.T, factory func() engine.Engine) {
	p, _ := NewPlan(t, "/bin/sleep", []string{"1000"}, nil)
	r := RunBox(t, factory(), p, Options{AfterExec: func(b *engine.Box) {
		if err := b.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("signal box: %v", err)
		}
	}})
	mustExec(t, r)
	if r.Exit != 128+int(syscall.SIGTERM) {
		t.Errorf("exit = %d, want %d: SIGTERM to the box must reach the program", r.Exit, 128+int(syscall.SIGTERM))
	}
}

func testProgramNotFound(t *testing.T, factory func() engine.Engine) {
	p, _ := NewPlan(t, "/usr/bin/agentbox-enginetest-no-such-program", nil, nil)
	r := RunBox(t, factory(), p, Options{})
	ev := r.Error()
	if ev == nil || ev.Code != engine.CodeProgramNotFound {
		t.Fatalf("events %+v (exit %d), want error %s", r.Events, r.Exit, engine.CodeProgramNotFound)
	}
	if r.Execed() {
		t.Errorf("box reported exec for a missing program")
	}
	if r.Exit == 0 {
		t.Errorf("exit 0 after a failed start")
	}
}

func testProgramNotExecutable(t *testing.T, factory func() engine.Engine) {
	p, _ := NewPlan(t, "/", nil, func(in *plan.Input) {
		in.Program = filepath.Join(in.Workspace, "not-executable")
		if err := os.WriteFile(in.Program, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	r := RunBox(t, factory(), p, Options{})
	if ev := r.Error(); ev == nil || ev.Code != engine.CodeProgramNotExec {
		t.Fatalf("events %+v (exit %d), want error %s", r.Events, r.Exit, engine.CodeProgramNotExec)
	}
}

func testSetupFailure(t *testing.T, factory func() engine.Engine) {
	p, d := sh(t, "exit 0", nil)
	missing := filepath.Join(d.RunDir, "missing")
	p.Mounts = append(p.Mounts, plan.Mount{Kind: plan.MountBind, Source: missing, Target: "/srv/missing"})
	r := RunBox(t, factory(), p, Options{})
	ev := r.Error()
	if ev == nil || ev.Code != engine.CodeBoxSetupFailed {
		t.Fatalf("events %+v, want error %s", r.Events, engine.CodeBoxSetupFailed)
	}
	if !strings.Contains(ev.Message, "missing") {
		t.Errorf("message %q does not name the failed step", ev.Message)
	}
	if r.Execed() || r.Exit == 0 {
		t.Errorf("execed=%v exit=%d after a failed set-up", r.Execed(), r.Exit)
	}
}

func testPipeStreams(t *testing.T, factory func() engine.Engine) {
	p, _ := sh(t, "printf to-stdout; printf to-stderr >&2; read line; printf %s \"$line\"", nil)
	r := RunBox(t, factory(), p, Options{Stdin: []byte("from-stdin\n")})
	mustExec(t, r)
	if got := string(r.Stdout); got != "to-stdoutfrom-stdin" {
		t.Errorf("stdout = %q", got)
	}
	if got := string(r.Stderr); got != "to-stderr" {
		t.Errorf("stderr = %q", got)
	}
}

func testBinaryPassthrough(t *testing.T, factory func() engine.Engine) {
	in := make([]byte, 0, 256*257)
	for i := 0; i < 257; i++ {
		for b := 0; b < 256; b++ {
			in = append(in, byte(b))
		}
	}
	p, _ := NewPlan(t, "/bin/cat", nil, nil)
	r := RunBox(t, factory(), p, Options{Stdin: in})
	mustExec(t, r)
	if !bytes.Equal(r.Stdout, in) {
		t.Errorf("stdout differs from stdin: %d bytes, want %d", len(r.Stdout), len(in))
	}
}

func testTTY(t *testing.T, factory func() engine.Engine) {
	p, _ := sh(t, "tty; stty size; test -t 0 && test -t 1 && test -t 2 && echo all-ttys", func(in *plan.Input) {
		in.Console = plan.ConsoleTTY
	})
	r := RunBox(t, factory(), p, Options{Rows: 33, Cols: 101})
	mustExec(t, r)
	if r.Events[0].Kind != engine.EventPTY {
		t.Errorf("first event %q, want %q", r.Events[0].Kind, engine.EventPTY)
	}
	out := strings.ReplaceAll(string(r.Stdout), "\r\n", "\n")
	for _, want := range []string{"/dev/pts/0\n", "33 101\n", "all-ttys\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("pty output %q lacks %q", out, want)
		}
	}
	if r.Exit != 0 {
		t.Errorf("exit %d", r.Exit)
	}
}

func testWorkspaceOwnership(t *testing.T, factory func() engine.Engine) {
	p, d := sh(t, "echo hi > file && mkdir dir && echo done", nil)
	r := RunBox(t, factory(), p, Options{})
	mustExec(t, r)
	if r.Exit != 0 {
		t.Fatalf("exit %d: %s", r.Exit, r.Stderr)
	}
	for _, name := range []string{"file", "dir"} {
		fi, err := os.Stat(filepath.Join(d.Workspace, name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
			t.Errorf("%s owned by %d:%d, want %d:%d", name, st.Uid, st.Gid, os.Getuid(), os.Getgid())
		}
	}
}

// testFoldersUnderDevShm: a launch whose run directory and workspace lie in a 0700 folder
// under /dev/shm (the runtime folder of a user whose XDG_RUNTIME_DIR is there) starts, reads
// its run directory's 0600 file and writes its workspace, the file its caller's on the host.
// Run by root, the box reaches them through their idmapped cover (docs/security.md, "Root
// running agentbox"); /dev/shm was once taken for a system folder and left uncovered, and every
// root launch there failed with mount_failed (permission denied on the bind's source).
func testFoldersUnderDevShm(t *testing.T, factory func() engine.Engine) {
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		t.Skip("no /dev/shm folder on this host")
	}
	top, err := os.MkdirTemp("/dev/shm", "agentbox-enginetest-")
	if err != nil {
		t.Skipf("cannot make a folder under /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	ws, run := filepath.Join(top, "ws"), filepath.Join(top, "agentbox", "run")
	for _, d := range []string{ws, run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(top, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "marker"), []byte("run-dir-read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, _ := sh(t, "cat /run/agentbox/marker && echo hi > file && echo WROTE", func(in *plan.Input) {
		in.Workspace, in.RunDir = ws, run
	})
	r := RunBox(t, factory(), p, Options{})
	mustExec(t, r)
	if out := string(r.Stdout); r.Exit != 0 || !strings.Contains(out, "run-dir-read") || !strings.Contains(out, "WROTE") {
		t.Fatalf("exit %d: %q %q", r.Exit, out, r.Stderr)
	}
	fi, err := os.Stat(filepath.Join(ws, "file"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
		t.Errorf("file owned by %d:%d, want %d:%d", st.Uid, st.Gid, os.Getuid(), os.Getgid())
	}
}

func testWritesOutside(t *testing.T, factory func() engine.Engine) {
	targets := []string{
		"/etc/agentbox-enginetest", "/usr/agentbox-enginetest", "/agentbox-enginetest",
		"/run/agentbox/agentbox-enginetest", "/dev/agentbox-enginetest", "/proc/agentbox-enginetest",
	}
	// Each write must fail; the last line is a write that must work, so that a broken shell
	// cannot pass the test.
	var script strings.Builder
	for _, tg := range targets {
		fmt.Fprintf(&script, "if echo x > %s; then echo WROTE %s; fi 2>/dev/null\n", tg, tg)
	}
	script.WriteString("echo ok > /tmp/x && echo ok > ./inside && echo TMP-AND-WORKSPACE-OK\n")
	p, d := sh(t, script.String(), nil)
	r := RunBox(t, factory(), p, Options{})
	mustExec(t, r)
	out := string(r.Stdout)
	if strings.Contains(out, "WROTE") {
		t.Errorf("writes outside the workspace succeeded:\n%s", out)
	}
	if !strings.Contains(out, "TMP-AND-WORKSPACE-OK") {
		t.Errorf("writes to /tmp and the workspace failed: %q %q", out, r.Stderr)
	}
	for _, tg := range targets[:3] {
		if _, err := os.Stat(tg); err == nil {
			t.Errorf("%s exists on the host", tg)
			os.Remove(tg)
		}
	}
	if _, err := os.Stat(filepath.Join(d.RunDir, "agentbox-enginetest")); err == nil {
		t.Errorf("the box wrote into the run dir")
	}
}

var nsKinds = []string{"cgroup", "ipc", "mnt", "net", "pid", "user", "uts"}

func nsScript() string {
	return "for n in " + strings.Join(nsKinds, " ") + "; do readlink /proc/self/ns/$n; done"
}

func hostNamespaces(t *testing.T) map[string]string {
	host := map[string]string{}
	for _, n := range nsKinds {
		l, err := os.Readlink("/proc/self/ns/" + n)
		if err != nil {
			t.Fatal(err)
		}
		host[n] = l
	}
	return host
}

func boxNamespaces(t *testing.T, r Result) map[string]string {
	mustExec(t, r)
	lines := strings.Fields(string(r.Stdout))
	if len(lines) != len(nsKinds) {
		t.Fatalf("namespace output %q (stderr %q)", r.Stdout, r.Stderr)
	}
	box := map[string]string{}
	for i, n := range nsKinds {
		box[n] = lines[i]
	}
	return box
}

func testNamespaces(t *testing.T, factory func() engine.Engine) {
	p, _ := sh(t, nsScript(), nil)
	box := boxNamespaces(t, RunBox(t, factory(), p, Options{}))
	for n, h := range hostNamespaces(t) {
		if box[n] == h {
			t.Errorf("box shares the host's %s namespace (%s)", n, h)
		}
	}
}

func testEgressAllow(t *testing.T, factory func() engine.Engine) {
	p, _ := sh(t, nsScript(), func(in *plan.Input) { in.Egress = plan.EgressAllow })
	box := boxNamespaces(t, RunBox(t, factory(), p, Options{}))
	for n, h := range hostNamespaces(t) {
		if shared := box[n] == h; shared != (n == "net") {
			t.Errorf("%s namespace: box %s, host %s", n, box[n], h)
		}
	}
}

func testLoopbackOnly(t *testing.T, factory func() engine.Engine) {
	p, _ := ProbePlan(t, "interfaces", nil)
	r := RunBox(t, factory(), p, Options{})
	mustExec(t, r)
	if got := strings.TrimSpace(string(r.Stdout)); got != "lo up" {
		t.Errorf("interfaces = %q, want only %q (stderr %q)", got, "lo up", r.Stderr)
	}
}

func testEnvironment(t *testing.T, factory func() engine.Engine) {
	p, _ := NewPlan(t, "/usr/bin/env", nil, nil)
	r := RunBox(t, factory(), p, Options{})
	mustExec(t, r)
	got := strings.Split(strings.TrimSuffix(string(r.Stdout), "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(p.Env, "\n") {
		t.Errorf("environment:\n%s\nwant exactly the plan's:\n%s", strings.Join(got, "\n"), strings.Join(p.Env, "\n"))
	}
	if bytes.Contains(r.Stdout, []byte("must-not-leak")) {
		t.Errorf("a caller variable outside the allowlist leaked")
	}
}

func testNoInheritedFDs(t *testing.T, factory func() engine.Engine) {
	for _, console := range []plan.Console{plan.ConsolePipe, plan.ConsoleTTY} {
		t.Run(string(console), func(t *testing.T) {
			t.Parallel()
			p, _ := ProbePlan(t, "fds", func(in *plan.Input) { in.Console = console })
			r := RunBox(t, factory(), p, Options{})
			mustExec(t, r)
			if got := strings.TrimSpace(strings.ReplaceAll(string(r.Stdout), "\r", "")); got != "0 1 2" {
				t.Errorf("open descriptors %q, want %q", got, "0 1 2")
			}
		})
	}
}

func testSettlement(t *testing.T, factory func() engine.Engine) {
	// The grandchild is double-forked into its own session, so the program's process group
	// does not hold it: only the pid namespace can end it.
	script := `stat -L -c %i /proc/self/ns/pid
setsid sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > /tmp/grandchild'
sleep 0.1; while [ ! -s /tmp/grandchild ]; do sleep 0.1; done
kill -0 "$(cat /tmp/grandchild)" && echo grandchild-alive`
	p, _ := sh(t, script, nil)
	r := RunBox(t, factory(), p, Options{})
	mustExec(t, r)
	lines := strings.Fields(string(r.Stdout))
	if len(lines) != 2 || lines[1] != "grandchild-alive" {
		t.Fatalf("output %q (stderr %q)", r.Stdout, r.Stderr)
	}
	ino, err := strconv.ParseUint(lines[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	left, err := ns.Remaining(ino)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("processes of the box's pid namespace remain after its end: %v", left)
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func testCorePattern(t *testing.T, factory func() engine.Engine) {
	const path = "/proc/sys/kernel/core_pattern"
	before, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("host has no %s: %v", path, err)
	}
	// Writing back the value read keeps the host unchanged even if the write got through.
	p, _ := sh(t, `v=$(cat `+path+`) && echo read-ok && if printf '%s\n' "$v" > `+path+`; then echo WROTE; fi`, nil)
	r := RunBox(t, factory(), p, Options{})
	mustExec(t, r)
	if !strings.Contains(string(r.Stdout), "read-ok") {
		t.Errorf("could not read %s in the box: %q %q", path, r.Stdout, r.Stderr)
	}
	if strings.Contains(string(r.Stdout), "WROTE") {
		t.Errorf("the box wrote %s", path)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Errorf("%s changed: %q → %q", path, before, after)
	}
}

// testInitHidden: the program cannot list the descriptors of the box's PID 1 (not dumpable, not
// ptraceable by it) or read its environment — also when agentbox runs as root and the box's uid
// 0 would own PID 1's /proc entries, which is what hidepid=ptraceable is for — while it sees
// itself.
func testInitHidden(t *testing.T, factory func() engine.Engine) {
	p, _ := sh(t, `test -d /proc/self/fd && echo self-ok
if ls /proc/1/fd >/dev/null 2>&1; then echo LISTED-FD; fi
if cat /proc/1/environ >/dev/null 2>&1; then echo READ-ENVIRON; fi`, nil)
	r := RunBox(t, factory(), p, Options{})
	mustExec(t, r)
	out := string(r.Stdout)
	if !strings.Contains(out, "self-ok") {
		t.Fatalf("the program cannot see itself in /proc: %q %q", r.Stdout, r.Stderr)
	}
	for _, bad := range []string{"LISTED-FD", "READ-ENVIRON"} {
		if strings.Contains(out, bad) {
			t.Errorf("box PID 1 is visible to the program: %s (uid %d)", bad, os.Getuid())
		}
	}
}
