package shim

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInitEnded: a process that runs is not ended; one that exited is, as a zombie its parent
// has not reaped yet and once reaped (its pid gone). The shim takes a box whose PID 1 had
// ended before its namespaces were read for settled (CI: a bwrap box's quick program ended
// first under load, and the launch was recorded unsettled).
func TestInitEnded(t *testing.T) {
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pid := c.Process.Pid
	if initEnded(pid) {
		t.Error("a running process taken for ended")
	}
	c.Process.Kill()
	// A zombie: wait for its exit without reaping it.
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if !initEnded(pid) {
		t.Error("a zombie taken for running")
	}
	c.Wait()
	if !initEnded(pid) {
		t.Error("a reaped process taken for running")
	}
}
