package attack

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/linux/proc"
	"github.com/agentbox/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// With ATTACK_LEADER_EXIT=1 the test binary is a process whose leader thread exits alone
// while another thread runs on (its /proc/PID/stat then says Z): TestCheckEscapeTree's
// multi-threaded case.
func init() {
	if os.Getenv("ATTACK_LEADER_EXIT") != "1" {
		return
	}
	runtime.LockOSThread()
	started := make(chan struct{})
	go func() {
		close(started)
		for {
			time.Sleep(time.Second)
		}
	}()
	<-started
	syscall.Syscall(unix.SYS_EXIT, 0, 0, 0) // this thread only
}

// TestCheckEscapeTree runs the escape-tree verdict against a real process left in a pid
// namespace of its own: the verdict sees it when the observation names it, and does not count
// a process that started after the reported escapee (what a later namespace given the same
// inode holds).
func TestCheckEscapeTree(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if err := cmd.Start(); err != nil {
		testenv.NoBoxes(t, "cannot start a process in a pid namespace here: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	start, ok := startTime(pid)
	if !ok {
		t.Fatalf("start time of %d unknown", pid)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	obs := func(start uint64, cmdline string) Observation {
		return Observation{Facts: map[string]string{"pidns": ns, "escapee-start": strconv.FormatUint(start, 10), "escapee-cmdline": cmdline}}
	}
	if err := checkEscapeTree(nil, obs(start, string(cmdline))); err == nil {
		t.Errorf("the escapee %d still runs in %s, and the verdict saw nothing", pid, ns)
	}
	if err := checkEscapeTree(nil, obs(start+1, "other")); err == nil {
		t.Errorf("a process %d that started before the escapee still runs in %s, and the verdict saw nothing", pid, ns)
	}
	if err := checkEscapeTree(nil, obs(start, "other")); err != nil {
		t.Errorf("a process started in the escapee's tick with another command line was counted: %v", err)
	}
	if start > 0 {
		if err := checkEscapeTree(nil, obs(start-1, string(cmdline))); err != nil {
			t.Errorf("a process started after the escapee was counted: %v", err)
		}
	}
	if err := checkEscapeTree(nil, Observation{Facts: map[string]string{"pidns": ns}}); err == nil {
		t.Errorf("an observation without the escapee's start time was accepted")
	}
	// Once it has exited, not yet reaped (a zombie, as box-init is between its exit and the
	// shim's wait), it runs nothing and is not counted, though /proc/PID/ns/pid still names ns.
	cmd.Process.Signal(syscall.SIGKILL)
	for i := 0; i < 1000; i++ {
		if st, err := proc.State(pid); err == nil && st == 'Z' {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st, err := proc.State(pid); err != nil || st != 'Z' {
		t.Fatalf("process %d: state %c (%v), want a zombie", pid, st, err)
	}
	if l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid"); err != nil || l != ns {
		t.Skipf("the zombie's /proc/%d/ns/pid: %q, %v: not the case this step tests", pid, l, err)
	}
	if err := checkEscapeTree(nil, obs(start+1, "other")); err != nil {
		t.Errorf("a process that started before the escapee, exited and not yet reaped, was counted: %v", err)
	}

	// A process whose leader thread exited while another thread runs reads Z in its stat
	// but runs code: it is counted.
	lead := exec.Command(os.Args[0], "-test.run=^$")
	lead.Env = append(os.Environ(), "ATTACK_LEADER_EXIT=1")
	lead.SysProcAttr = cmd.SysProcAttr
	if err := lead.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lead.Process.Kill(); lead.Wait() })
	lpid := lead.Process.Pid
	task := "/proc/" + strconv.Itoa(lpid) + "/task"
	for i := 0; i < 1000; i++ {
		ts, _ := os.ReadDir(task)
		if st, err := proc.State(lpid); err == nil && st == 'Z' && len(ts) > 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ts, _ := os.ReadDir(task); len(ts) < 2 {
		t.Fatalf("process %d: %d threads, want its leader exited and another running", lpid, len(ts))
	}
	lns, err := os.Readlink("/proc/" + strconv.Itoa(lpid) + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	lstart, _ := startTime(lpid)
	lobs := Observation{Facts: map[string]string{"pidns": lns, "escapee-start": strconv.FormatUint(lstart+1, 10), "escapee-cmdline": "other"}}
	if err := checkEscapeTree(nil, lobs); err == nil {
		t.Errorf("process %d, its leader thread exited and another thread running, was not counted", lpid)
	}
}
