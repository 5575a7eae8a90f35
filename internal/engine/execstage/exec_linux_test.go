package execstage

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/engine/spec"
	"github.com/agentbox/agentbox/internal/plan"
)

// TestMain runs box-exec when Start re-executes the test binary as `agentbox box-exec`, with
// collectUntilClosed as its hook before a report.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "box-exec" {
		beforeReport = collectUntilClosed
		os.Exit(Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// collectUntilClosed collects garbage and lets finalizers run until box-exec's end of the exec
// socket is closed, or for half a second: it widens to certain what a collection at the wrong
// moment does by chance.
func collectUntilClosed() {
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); {
		runtime.GC()
		if _, err := unix.FcntlInt(fdExec, unix.F_GETFD, 0); errors.Is(err, unix.EBADF) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReportAfterCollection guards box-exec's report of a failure against a garbage
// collection between its last read of the exec socket and its report: the socket's *os.File
// was unreachable there, its finalizer closed the socket, and box-init got "box-exec ended
// before the program without a report" instead of the failure (TestLandlockUnavailable/bwrap
// failed so about once in 40 runs on a loaded machine).
func TestReportAfterCollection(t *testing.T) {
	s := &spec.Spec{Version: spec.Version, Console: plan.ConsolePipe, Program: "/bin/true", Cwd: "/",
		Seccomp: "no-such-profile"}
	raw, err := s.Render()
	if err != nil {
		t.Fatal(err)
	}
	x, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	pid := x.pid
	defer func() {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
			t.Errorf("reap box-exec: %v", err)
		}
	}()
	// box-exec fails on the spec's seccomp profile before it reads the news that the box is
	// built and the streams, which box-init has sent by then: they are left unread.
	f := x.handOver(raw, [3]int{0, 1, 2})
	if f == nil {
		t.Fatal("box-exec with an unknown seccomp profile: no failure reported")
	}
	if f.Code != engine.CodeBoxSetupFailed || !strings.Contains(f.Message, `unknown seccomp profile "no-such-profile"`) {
		t.Fatalf("box-exec's report: %+v, want its unknown seccomp profile", f)
	}
}
