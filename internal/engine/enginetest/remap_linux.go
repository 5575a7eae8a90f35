package enginetest

import (
	"fmt"
	"os"
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
// (idmap.BoxUID of the starting process); and a descriptor of the host's / handed to the
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
if [ -d /proc/self/fd/0/etc ]; then echo REACHED-HOST-ROOT; fi
read x < ./fifo && echo "DONE $x"`, secret)
	p, d := sh(t, script, nil)
	if err := syscall.Mkfifo(filepath.Join(d.Workspace, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	hostRoot, err := os.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	want := idmap.BoxUID(os.Getpid())
	var seen []string
	r := RunBox(t, factory(), p, Options{StdinFile: hostRoot, AfterExec: func(b *engine.Box) {
		seen = boxUIDs(t, b.NamespacePid())
		// The program goes on (and ends) once the host has looked.
		if err := os.WriteFile(filepath.Join(d.Workspace, "fifo"), []byte("go\n"), 0); err != nil {
			t.Errorf("release the program: %v", err)
		}
	}})
	mustExec(t, r)
	out := string(r.Stdout)
	if !strings.Contains(out, "REACHED-HOST-ROOT") || !strings.Contains(out, "DONE go") {
		t.Fatalf("the program did not reach the host's / or was not released (exit %d): %q %q", r.Exit, out, r.Stderr)
	}
	for _, bad := range []string{"LEAK-OPT", "LEAK-SHADOW", "ROOT-ONLY"} {
		if strings.Contains(out, bad) {
			t.Errorf("a root-run box read a root-only host file through a descriptor of /: %s\n%s", bad, out)
		}
	}
	if len(seen) < 2 {
		t.Fatalf("found %d processes of the box on the host (its init and the program at least): %v", len(seen), seen)
	}
	for _, s := range seen {
		if !strings.HasSuffix(s, fmt.Sprintf(" uid %d %d %d %d", want, want, want, want)) {
			t.Errorf("a process of the box runs on the host as %s, want box uid %d (and never host root)", s, want)
		}
	}
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
