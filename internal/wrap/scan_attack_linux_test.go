package wrap

import (
	"fmt"
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

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "scan-helper" {
		os.Exit(scanHelper(os.Args[2]))
	}
	os.Exit(m.Run())
}

// scanHelper scans for the managed script and prints the pid of every finding, one a line: the
// scanning user's daemon, run as another user by TestAttackScanOtherUsersFolder.
func scanHelper(script string) int {
	tg, err := Canonicalize("fakeagent", script, "")
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	found, err := Scanner{}.Scan([]Target{tg})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	for _, f := range found {
		fmt.Println(f.Process.Pid)
	}
	return 0
}

// managedScript writes a #!/bin/sh managed program into a 0755 folder of dir.
func managedScript(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	vendor := filepath.Join(dir, "vendor")
	if err := os.Mkdir(vendor, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(vendor, "fakeagent")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nwhile :; do sleep 1; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// runJob starts `sh job.sh` in folder (as uid when attr says so), a job of the user's own that
// is not the managed program, and waits until sh has read it (its sleep is running).
func runJob(t *testing.T, folder string, attr *syscall.SysProcAttr) int {
	t.Helper()
	job := filepath.Join(folder, "job.sh")
	if err := os.WriteFile(job, []byte("sleep 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("sh", "job.sh")
	c.Dir, c.SysProcAttr = folder, attr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	children := fmt.Sprintf("/proc/%d/task/%d/children", c.Process.Pid, c.Process.Pid)
	for i := 0; ; i++ {
		if b, _ := os.ReadFile(children); len(strings.TrimSpace(string(b))) > 0 {
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					testenv.KillAtCleanup(t, pid) // pinned now: by the cleanup the pid may be another's
				}
			}
			return c.Process.Pid
		}
		if i == 500 {
			t.Fatalf("sh job.sh in %s started nothing", folder)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// swapForSymlink replaces folder/job.sh by a symlink to target owned by uid (-1: unchanged).
func swapForSymlink(t *testing.T, folder, target string, uid int) {
	t.Helper()
	job := filepath.Join(folder, "job.sh")
	if err := os.Remove(job); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, job); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		if err := os.Lchown(job, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAttackScanSymlinkSwap guards issue 21 finding 14 for any user: a job the user runs in a
// folder others can write (mode 0777) whose script file is swapped for a symlink to a managed
// #! program is not reported (under violations: terminate the daemon killed it). The same swap
// in the user's own folder is still followed, as npm's bin links are: the scanner still finds it.
func TestAttackScanSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	script := managedScript(t, dir)
	shared, own := filepath.Join(dir, "shared"), filepath.Join(dir, "own")
	for _, d := range []string{shared, own} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	victim := runJob(t, shared, nil)
	mine := runJob(t, own, nil)
	swapForSymlink(t, shared, script, -1)
	swapForSymlink(t, own, script, -1)
	tg, err := Canonicalize("fakeagent", script, "")
	if err != nil {
		t.Fatal(err)
	}
	found, err := Scanner{}.Scan([]Target{tg})
	if err != nil {
		t.Fatal(err)
	}
	got := pidsOf(found)
	if got[victim] != "" {
		t.Errorf("sh job.sh (pid %d) in a folder others can write was reported as the managed program after job.sh was swapped for a symlink", victim)
	}
	if got[mine] == "" {
		t.Errorf("sh job.sh (pid %d) naming the managed script through a symlink in the user's own folder was not found: %v", mine, got)
	}
}

// TestAttackScanOtherUsersFolder guards issue 21 finding 14 with two ordinary users: the
// victim (testenv.OtherUID) runs `sh job.sh` in a folder that the attacker (testenv.SecondUID)
// owns; the attacker swaps job.sh for a symlink to the victim's managed program; the victim's
// own scanner must not report (or, under terminate, kill) the job. The victim's symlink in the
// victim's own folder is found, so the scan as the victim does see such processes.
func TestAttackScanOtherUsersFolder(t *testing.T) {
	_, helper := testenv.HelperCopy(t)
	base, err := os.MkdirTemp("", "scan-users-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	script := managedScript(t, base)
	attacker, mine := filepath.Join(base, "attacker"), filepath.Join(base, "mine")
	for d, uid := range map[string]int{attacker: testenv.SecondUID, mine: testenv.OtherUID} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(d, uid, uid)
	}
	victim := runJob(t, attacker, testenv.AsUser(testenv.OtherUID))
	own := runJob(t, mine, testenv.AsUser(testenv.OtherUID))
	swapForSymlink(t, attacker, script, testenv.SecondUID)
	swapForSymlink(t, mine, script, testenv.OtherUID)

	scan := exec.Command(helper, "scan-helper", script)
	scan.SysProcAttr = testenv.AsUser(testenv.OtherUID)
	out, err := scan.CombinedOutput()
	if err != nil {
		t.Fatalf("scan as uid %d: %v\n%s", testenv.OtherUID, err, out)
	}
	got := map[string]bool{}
	for _, l := range strings.Fields(string(out)) {
		got[l] = true
	}
	if got[strconv.Itoa(victim)] {
		t.Errorf("the victim's sh job.sh (pid %d) in uid %d's folder was reported after that user swapped job.sh for a symlink to the managed program (scan: %q)", victim, testenv.SecondUID, out)
	}
	if !got[strconv.Itoa(own)] {
		t.Errorf("the victim's own symlinked run (pid %d) was not found (scan: %q)", own, out)
	}
}
