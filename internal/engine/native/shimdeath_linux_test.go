package native_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/native"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/plan"
)

// testShim is a minimal shim (argv: test-shim WORKSPACE RUNDIR): it starts a box running
// sleep, prints box-init's pid and the box's pid namespace, and waits to be killed.
func testShim(args []string) int {
	p, err := plan.Build(plan.Input{
		ID: "shimdeath", Program: "/bin/sleep", Args: []string{"1000"}, Workspace: args[0],
		Home: "/home/agentbox-enginetest", UID: os.Getuid(), GID: os.Getgid(), RunDir: args[1],
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	e := &native.Engine{}
	req, err := e.Request(p)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	shimEnd, boxEnd, _ := engine.ControlPair()
	devnull, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	box, err := e.Start(req, engine.IO{Stdin: devnull, Stdout: devnull, Stderr: devnull, Control: boxEnd})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	boxEnd.Close()
	if ev, _, err := engine.RecvEvent(shimEnd); err != nil || ev.Kind != engine.EventExec {
		fmt.Println("error", ev, err)
		return 1
	}
	pidNS, err := ns.Inode(box.Process.Pid, "pid")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println(box.Process.Pid, pidNS)
	// Wait to be killed. (Not `select {}`: with no other goroutine left, the runtime would end
	// this process at once as a deadlock, and the box with it, before the test looks at it.)
	box.Process.Wait()
	time.Sleep(time.Hour)
	return 1
}

func TestBoxDiesWithShim(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "test-shim", t.TempDir(), t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("shim: %q %v", line, err)
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] == "error" {
		cmd.Process.Kill()
		t.Fatalf("shim: %q", line)
	}
	pidNS, _ := strconv.ParseUint(f[1], 10, 64)
	if left, _ := ns.Remaining(pidNS); len(left) == 0 {
		t.Fatalf("box not running before the shim dies")
	}
	cmd.Process.Kill()
	cmd.Wait()
	// The kernel kills box-init (parent-death signal) and with it the pid namespace; box-init,
	// orphaned, stays a zombie until the host's init reaps it. Poll for the end; the bound only
	// turns a hang into a failure.
	deadline := time.Now().Add(time.Minute)
	for {
		left, err := ns.Remaining(pidNS)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				unix.Kill(pid, unix.SIGKILL)
			}
			t.Fatalf("box processes %v outlived their shim", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
