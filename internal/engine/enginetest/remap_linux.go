package enginetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/linux/idmap"
	"github.com/agentbox/agentbox/internal/linux/ns"
)

// testRootRemapped: a box started by host root is no host root (docs/security.md, "Root
// running agentbox"). The host sees every process of the box's pid namespace as the box uid
// (one of idmap.BoxUID's of the starting process, idmap.Take); and a descriptor of the host's / handed to the
// program — a process that escaped the box's mount view, which sees the host's own mounts,
// not the box's masks nor the idmapped system folders — reads through it neither a 0600 file
// of root's in /opt nor /etc/shadow (root's, 0640), which host root reads as their owner. The
// program waits on a FIFO in the workspace (which it owns, idmapped) while the host looks.
func testRootRemapped(t *testing.T, factory func() engine.Engine) {
	if os.Geteuid() != 0 {
		t.Skip("only boxes started by host root are remapped")
	}
	secret := RootOnlyFile(t, "/opt")
	script := fmt.Sprintf(`if cat /proc/self/fd/0%s; then echo LEAK-OPT; fi
if head -c 1 /proc/self/fd/0/etc/shadow; then echo LEAK-SHADOW; fi
if [ -d /proc/self/fd/0/etc ]; then echo REACHED-HOST-ROOT; fi`, secret)
	var seen []string
	out := runHandedHostRoot(t, factory, script, func(b *engine.Box) { seen = boxUIDs(t, b.NamespacePid()) })
	if !strings.Contains(out, "REACHED-HOST-ROOT") {
		t.Fatalf("the program did not reach the host's /: %q", out)
	}
	for _, bad := range []string{"LEAK-OPT", "LEAK-SHADOW", "ROOT-ONLY"} {
		if strings.Contains(out, bad) {
			t.Errorf("a root-run box read a root-only host file through a descriptor of /: %s\n%s", bad, out)
		}
	}
	if len(seen) < 2 {
		t.Fatalf("found %d processes of the box on the host (its init and the program at least): %v", len(seen), seen)
	}
	want := strings.Fields(seen[0])[3]
	if id, err := strconv.Atoi(want); err != nil || !idmap.IsBoxUID(id) || (id-idmap.BoxUIDBase)%idmap.PIDs != os.Getpid() {
		t.Errorf("the box's init runs on the host as %s, want a box uid of this process's (idmap.BoxUID)", seen[0])
	}
	for _, s := range seen {
		if !strings.HasSuffix(s, fmt.Sprintf(" uid %s %s %s %s", want, want, want, want)) {
			t.Errorf("a process of the box runs on the host as %s, want box uid %s (and never host root)", s, want)
		}
	}
}

// testRootBoxUIDNotShared: a box started by host root shares its host uid with nothing live
// (docs/security.md, "Root running agentbox"). A process of the box uid the box would have had
// before (0x70000000 + the starting process's pid, which the kernel gives again to a later
// shim while processes of an earlier box of that uid may still be ending) is left running, as
// an earlier box's would be, with a 0600 file of its own in /opt. The box runs as another uid:
// through a descriptor of the host's / it cannot read that file, and from the leftover's uid
// the box's program can be neither signalled (kill -0) nor inspected under ptrace's access
// check (/proc/PID/environ). The leftover's uid does both to a process of its own, the check
// that the attempts are real. The box's pid namespace and Landlock's scopes keep the box from
// naming the leftover at all; this is the kernel's uid check beneath them.
func testRootBoxUIDNotShared(t *testing.T, factory func() engine.Engine) {
	if os.Geteuid() != 0 {
		t.Skip("only boxes started by host root are remapped")
	}
	old := idmap.BoxUIDBase + os.Getpid()
	asOld := func(script string) string {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(old), Gid: uint32(old), Groups: []uint32{}}}
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	leftover := exec.Command("/bin/sleep", "1000")
	leftover.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(old), Gid: uint32(old), Groups: []uint32{}}}
	if err := leftover.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leftover.Process.Kill(); leftover.Wait() })
	secret := RootOnlyFile(t, "/opt")
	if err := os.Chown(secret, old, old); err != nil {
		t.Fatal(err)
	}
	probe := func(pid int) string {
		return asOld(fmt.Sprintf(`if kill -0 %d; then echo SIGNALLED; fi
if head -c 1 /proc/%d/environ >/dev/null; then echo TRACED; fi
if cat %s; then echo READ; fi`, pid, pid, secret))
	}
	if out := probe(leftover.Process.Pid); !strings.Contains(out, "SIGNALLED") || !strings.Contains(out, "TRACED") || !strings.Contains(out, "READ") {
		t.Fatalf("uid %d should signal and inspect its own process and read its own file: %q", old, out)
	}

	var seen []string
	var reached string
	out := runHandedHostRoot(t, factory, fmt.Sprintf(`if cat /proc/self/fd/0%s; then echo LEAK-LEFTOVER; fi`, secret), func(b *engine.Box) {
		seen = boxUIDs(t, b.NamespacePid())
		for _, s := range seen {
			pid, _ := strconv.Atoi(strings.Fields(s)[1])
			if out := probe(pid); strings.Contains(out, "SIGNALLED") || strings.Contains(out, "TRACED") {
				reached += fmt.Sprintf("%s: %q\n", s, out)
			}
		}
	})
	if strings.Contains(out, "LEAK-LEFTOVER") || strings.Contains(out, "ROOT-ONLY") {
		t.Errorf("a root-run box read the 0600 file a process of uid %d left:\n%s", old, out)
	}
	if reached != "" {
		t.Errorf("a process of uid %d, left from an earlier box, signalled or inspected the box's processes:\n%s", old, reached)
	}
	if len(seen) < 2 {
		t.Fatalf("found %d processes of the box on the host (its init and the program at least): %v", len(seen), seen)
	}
	for _, s := range seen {
		if strings.HasSuffix(s, fmt.Sprintf(" uid %d %d %d %d", old, old, old, old)) {
			t.Errorf("a process of the box runs as uid %d, which a live process left from an earlier box holds: %s", old, s)
		}
	}
}

// runHandedHostRoot runs script in a box whose standard input is a descriptor of the host's /
// (a process that escaped the box's mount view) and which then waits on a FIFO in the
// workspace while look looks at the box from the host; it returns the program's output.
func runHandedHostRoot(t *testing.T, factory func() engine.Engine, script string, look func(b *engine.Box)) string {
	t.Helper()
	p, d := sh(t, script+"\n"+`read x < ./fifo && echo "DONE $x"`, nil)
	if err := syscall.Mkfifo(filepath.Join(d.Workspace, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	hostRoot, err := os.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	r := RunBox(t, factory(), p, Options{StdinFile: hostRoot, AfterExec: func(b *engine.Box) {
		look(b)
		// The program goes on (and ends) once the host has looked.
		if err := os.WriteFile(filepath.Join(d.Workspace, "fifo"), []byte("go\n"), 0); err != nil {
			t.Errorf("release the program: %v", err)
		}
	}})
	mustExec(t, r)
	out := string(r.Stdout)
	if !strings.Contains(out, "DONE go") {
		t.Fatalf("the program was not released (exit %d): %q %q", r.Exit, out, r.Stderr)
	}
	return out
}

// RootOnlyFile makes a 0600 file of the caller's (root's) holding "ROOT-ONLY" in dir, removed
// when t ends, and returns its path.
func RootOnlyFile(t testing.TB, dir string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "agentbox-attack-rootonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	_, err = f.WriteString("ROOT-ONLY\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// boxUIDs returns, for each process of the pid namespace of pid (as the host sees it), "pid N
// uid R E S F" from its status.
func boxUIDs(t *testing.T, pid int) []string {
	t.Helper()
	want, err := ns.Inode(pid, "pid")
	if err != nil {
		t.Errorf("the box's pid namespace: %v", err)
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Error(err)
		return nil
	}
	var out []string
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ino, err := ns.Inode(p, "pid"); err != nil || ino != want {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue // ended meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				out = append(out, fmt.Sprintf("pid %d uid %s", p, strings.Join(strings.Fields(v), " ")))
			}
		}
	}
	return out
}
