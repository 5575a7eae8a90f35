package proc

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSameAndEnded follows a child through its life: running, it is the process its start
// time names (and not with another start time), and WaitEnded waits for it until its bound;
// a zombie, it has ended but still holds its pid, and WaitEnded returns on its exit; reaped,
// it is gone.
func TestSameAndEnded(t *testing.T) {
	self, err := StartTime(os.Getpid())
	if err != nil || self == 0 {
		t.Fatalf("StartTime(self) = %d, %v", self, err)
	}
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, err := StartTime(pid)
	if err != nil || start < self {
		t.Fatalf("StartTime(child) = %d, %v (the test started at %d)", start, err, self)
	}
	if !Same(pid, start) || Same(pid, start+1) || Ended(pid) {
		t.Fatalf("running child: Same %v, Same with another start %v, Ended %v", Same(pid, start), Same(pid, start+1), Ended(pid))
	}
	if st, err := State(pid); err != nil || (st != 'S' && st != 'R') {
		t.Errorf("running child: State %q, %v; want S or R", st, err)
	}
	// A test binary can start and get here within its first clock tick of CPU time: spin
	// until the kernel has counted one (bounded), then CPUTicks must show it.
	ticks, err := CPUTicks(os.Getpid())
	for end := time.Now().Add(10 * time.Second); err == nil && ticks == 0 && time.Now().Before(end); {
		for spin := time.Now(); time.Since(spin) < 5*time.Millisecond; {
		}
		ticks, err = CPUTicks(os.Getpid())
	}
	if err != nil || ticks == 0 {
		t.Errorf("CPUTicks(self) = %d, %v after 10 s of spinning; want the test's CPU time so far", ticks, err)
	}
	if WaitEnded(pid, 20*time.Millisecond) {
		t.Fatal("WaitEnded of a running child reported it ended")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if !WaitEnded(pid, time.Minute) || !Ended(pid) {
		t.Fatalf("WaitEnded of a killed child: not ended after a minute (Ended %v)", Ended(pid))
	}
	// Wait until it is a zombie, without reaping it.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if !Same(pid, start) || !Ended(pid) {
		t.Errorf("zombie child: Same %v, Ended %v", Same(pid, start), Ended(pid))
	}
	if st, err := State(pid); err != nil || st != 'Z' {
		t.Errorf("zombie child: State %q, %v; want Z", st, err)
	}
	cmd.Wait()
	if Same(pid, start) || !Ended(pid) {
		t.Errorf("reaped child: Same %v, Ended %v", Same(pid, start), Ended(pid))
	}
	if _, err := StartTime(pid); err == nil {
		t.Error("StartTime of a reaped child succeeded")
	}
	if _, err := State(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("State of a reaped child: %v, want fs.ErrNotExist", err)
	}
	if !WaitEnded(pid, time.Minute) {
		t.Error("WaitEnded of a reaped child: not ended")
	}
}

// TestOpenIn: a handle is opened only on a live process of the named pid namespace, and its
// Wait reports the process's exit, as a zombie already (before anyone reaps it).
func TestOpenIn(t *testing.T) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		t.Skipf("no pid namespace file: %v", err)
	}
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	if h, err := OpenIn(cmd.Process.Pid, st.Ino+1); err == nil {
		h.Close()
		t.Fatalf("OpenIn with another pid namespace's inode succeeded")
	}
	h, err := OpenIn(cmd.Process.Pid, st.Ino)
	if err != nil {
		t.Fatalf("OpenIn: %v", err)
	}
	defer h.Close()
	if h.Wait(0) {
		t.Fatalf("Wait says a sleeping process has exited")
	}
	cmd.Process.Kill()
	if !h.Wait(time.Minute) {
		t.Fatalf("Wait did not see the killed process exit")
	}
	if !h.Wait(0) {
		t.Errorf("Wait(0) after the exit says the process runs")
	}
	var none *Handle
	if !none.Wait(0) {
		t.Errorf("a nil handle has something to wait for")
	}
}

// TestWaitPidfdThroughSignals waits for a child that exits 300 ms later while the waiting
// thread receives a signal every millisecond (SIGURG, which the Go runtime handles: its own
// preemption signal). Each one ends poll(2) with EINTR; the wait must go on until the child's
// exit. A single poll, as readiness's killRef made, returned at the first signal (the next
// probe then took a killed box's PID 1 for one that survives SIGKILL).
func TestWaitPidfdThroughSignals(t *testing.T) {
	child := exec.Command("sleep", "0.3")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	fd, err := unix.PidfdOpen(child.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	tid := make(chan int)
	type result struct {
		ended bool
		took  time.Duration
	}
	done := make(chan result)
	go func() {
		// The waiting goroutine keeps its thread, so that the signals reach the wait.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid <- unix.Gettid()
		start := time.Now()
		ended := WaitPidfd(fd, 10*time.Second)
		done <- result{ended, time.Since(start)}
	}()
	target := <-tid
	var sent int
	for {
		select {
		case r := <-done:
			if !r.ended {
				t.Fatalf("WaitPidfd returned false after %v, %d signals sent: the child (300 ms) had not exited", r.took, sent)
			}
			if !Ended(child.Process.Pid) {
				t.Fatalf("WaitPidfd returned true after %v, but the child has not ended", r.took)
			}
			t.Logf("waited %v through %d signals", r.took, sent)
			return
		case <-time.After(time.Millisecond):
			if unix.Tgkill(os.Getpid(), target, unix.SIGURG) == nil {
				sent++
			}
		}
	}
}

// TestMachineCPU sums /proc/stat's cpuN lines (all, or those the affinity allows) and counts
// the CPUs, and IdleCores gives the idle time between two readings in CPUs' worth.
func TestMachineCPU(t *testing.T) {
	text := "cpu  100 5 50 1000 20 3 2 1 7 0\ncpu0 50 2 25 500 10 1 1 0 3 0\ncpu1 50 3 25 500 10 2 1 1 4 0\nintr 1 2 3\n"
	m, err := parseMachineCPU(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (MachineCPU{Idle: 1020, Total: 1181, CPUs: 2}); m != want {
		t.Fatalf("parsed %+v, want %+v (guest time is not added again)", m, want)
	}
	one, err := parseMachineCPU(text, func(n int) bool { return n == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if want := (MachineCPU{Idle: 510, Total: 592, CPUs: 1}); one != want {
		t.Fatalf("cpu1 alone parsed %+v, want %+v", one, want)
	}
	// 100 ticks later on two CPUs: 150 idle of 200 is one and a half CPUs idle.
	later := MachineCPU{Idle: m.Idle + 150, Total: m.Total + 200, CPUs: 2}
	if got := later.IdleCores(m); got != 1.5 {
		t.Errorf("IdleCores = %v, want 1.5", got)
	}
	if got := m.IdleCores(m); got != 0 {
		t.Errorf("IdleCores with no tick between = %v, want 0", got)
	}
	for _, bad := range []string{"", "intr 1\n", "cpu  1 2 3\ncpu0 1 2 3\n", "cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 3 x 5 6 7 8\n", "cpu  1 2 3 4 5 6 7 8\n", "cpu  1 2 3 4 5 6 7 8\ncpuX 1 2 3 4 5 6 7 8\n"} {
		if _, err := parseMachineCPU(bad, nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("parseMachineCPU(%q) = %v, want ErrMalformed", bad, err)
		}
	}
	if _, err := parseMachineCPU(text, func(int) bool { return false }); !errors.Is(err, ErrMalformed) {
		t.Errorf("no CPU allowed: %v, want ErrMalformed", err)
	}
	live, err := ReadMachineCPU()
	if err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	if live.CPUs < 1 || live.CPUs > set.Count() || live.Idle > live.Total {
		t.Errorf("this machine's /proc/stat read as %+v; the affinity allows %d CPUs", live, set.Count())
	}
}
