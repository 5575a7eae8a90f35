package readiness_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

func init() { helpers["squat-listeners"] = squatListeners }

// squatListeners is what another local user can do to a user's probes: read the probe's
// abstract socket names from /proc/net/unix and the loopback ports that uid args[0] listens on
// from /proc/net/tcp, and connect to each in a loop. With a second argument, a pid, it connects
// only to listeners that process holds (the own-uid test's probe runs in the test process:
// other packages' probes, run by the suite at the same time as the same uid, must not be hit).
// It says "squatting" once it has read both tables, then runs until killed.
func squatListeners(args []string) int {
	if len(args) != 1 && len(args) != 2 {
		return 2
	}
	victim := args[0]
	// held reports whether the socket inode is one of pid's descriptors (always, without a pid).
	held := func(inode string) bool {
		if len(args) < 2 {
			return true
		}
		fds, err := os.ReadDir("/proc/" + args[1] + "/fd")
		if err != nil {
			return false
		}
		for _, fd := range fds {
			if l, err := os.Readlink("/proc/" + args[1] + "/fd/" + fd.Name()); err == nil && l == "socket:["+inode+"]" {
				return true
			}
		}
		return false
	}
	said := false
	for {
		if b, err := os.ReadFile("/proc/net/unix"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				f := strings.Fields(l)
				if len(f) == 8 && strings.HasPrefix(f[7], "@agentbox-readiness-") && held(f[6]) {
					if c, err := net.Dial("unix", f[7]); err == nil {
						c.Close()
					}
				}
			}
		}
		if b, err := os.ReadFile("/proc/net/tcp"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				f := strings.Fields(l)
				// sl local rem st … uid: a listener (0A) of the victim on 127.0.0.1.
				if len(f) < 10 || f[3] != "0A" || f[7] != victim || !strings.HasPrefix(f[1], "0100007F:") || !held(f[9]) {
					continue
				}
				if port, err := strconv.ParseUint(f[1][9:], 16, 16); err == nil {
					if c, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(int(port))); err == nil {
						c.Close()
					}
				}
			}
		}
		if !said {
			os.Stdout.WriteString("squatting\n")
			said = true
		}
		time.Sleep(time.Millisecond)
	}
}

// startSquatter starts squatListeners against victim's listeners as attr's user and waits
// until it runs.
func startSquatter(t *testing.T, exe string, victim int, attr *syscall.SysProcAttr, only ...int) {
	t.Helper()
	args := []string{"squat-listeners", strconv.Itoa(victim)}
	for _, pid := range only {
		args = append(args, strconv.Itoa(pid))
	}
	cmd := exec.Command(exe, args...)
	cmd.SysProcAttr = attr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "squatting\n" {
		t.Fatalf("squatter: %q %v", line, err)
	}
}

// TestProbeCountsOwnUsersConnections: a connection to a probe listener from the daemon's own
// uid (a box runs as it) is still a breach, whatever process makes it: the probe fails on
// network.host_listeners_untouched. It runs as any user.
func TestProbeCountsOwnUsersConnections(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	startSquatter(t, self, os.Getuid(), nil, os.Getpid())
	res := probe(t, "native", nil)
	if res.OK() {
		t.Fatal("the probe passed while a process of its own uid connected to its host listeners")
	}
	for _, f := range res.Facts {
		if f.Name == "network.host_listeners_untouched" && f.OK {
			t.Errorf("host_listeners_untouched held with own-uid connections: %s", f.Detail)
		}
	}
}

// TestAttackProbeListenersOtherUser guards issue 21 finding 13 with two ordinary users: while
// testenv.SecondUID connects in a loop to every probe listener it can find of the victim
// (testenv.OtherUID), the victim's probe still passes (it failed as a breach and refused every
// launch). Root only (it runs both users).
func TestAttackProbeListenersOtherUser(t *testing.T) {
	t.Parallel()
	dir, helper := testenv.HelperCopy(t)
	base := filepath.Join(dir, "v")
	rt, home := filepath.Join(base, "run"), filepath.Join(base, "home")
	for _, d := range []string{base, rt, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, testenv.OtherUID, testenv.OtherUID); err != nil {
			t.Fatal(err)
		}
	}
	startSquatter(t, helper, testenv.OtherUID, testenv.AsUser(testenv.SecondUID))

	ctx, cancel := context.WithTimeout(context.Background(), probeGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, helper, "probe-helper", rt, home, "native")
	cmd.SysProcAttr = testenv.AsUser(testenv.OtherUID)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var hr struct {
		OK             bool
		Reason, Detail string
	}
	if err != nil || json.Unmarshal(out, &hr) != nil {
		t.Fatalf("probe as uid %d: %v, %q, %s", testenv.OtherUID, err, out, stderr.Bytes())
	}
	if !hr.OK {
		t.Errorf("the victim's probe failed while uid %d connected to its listeners: %s: %s", testenv.SecondUID, hr.Reason, hr.Detail)
	}
}
