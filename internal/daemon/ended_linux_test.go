package daemon

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/launchdir"
)

// TestEndAnsweredBeforeCommitSurvivesDaemonEnd guards the end's answer before its commit: a
// launch's client is answered with the outcome (api.WaitEnded) once the launch's end is
// settled — its brokers' end, the check at exit, done — while the box's init exits and the
// outcome is committed. The daemon ends in that gap (the hook holds its settlement there, so
// nothing after the answer happens, as if it were killed): the store still has the launch
// running, and the next daemon, started in the same folders, settles it from what the first
// left (the launch directory's status.json) with the outcome the client was told, not lost.
func TestEndAnsweredBeforeCommitSurvivesDaemonEnd(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // (registered first: runs after the daemons' ends)
	reached := make(chan string, 1)
	var hold sync.Once // the first launch's settlement only
	td := startDaemonOpts(t, Options{afterEnded: func(id string) {
		hold.Do(func() {
			reached <- id
			<-release
		})
	}})
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp, err := td.c.Launch(ctx, &api.LaunchRequest{Program: "sh", Path: sh, Args: []string{"-c", "exit 7"}, Workspace: td.work, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-reached:
		if id != resp.ID {
			t.Fatalf("the hook held launch %s, want %s", id, resp.ID)
		}
	case <-time.After(time.Minute):
		t.Fatal("the launch's end was not settled within a minute")
	}
	// The client's answer: the outcome, although it is not committed.
	l, err := td.c.WaitEnded(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l.State != api.StateExited || l.ExitCode == nil || *l.ExitCode != 7 {
		t.Fatalf("answer to the wait for the end: state %s exit %v, want exited 7", l.State, l.ExitCode)
	}
	// Anyone asking after the client is told the same.
	ls, err := td.c.ListLaunches(ctx, client.LaunchQuery{})
	if err != nil || len(ls) != 1 || ls[0].State != api.StateExited {
		t.Fatalf("launches listed before the commit: %+v, %v; want the one exited", ls, err)
	}
	if ls, err := td.c.ListLaunches(ctx, client.LaunchQuery{States: []string{api.StateRunning, api.StateStarting}}); err != nil || len(ls) != 0 {
		t.Fatalf("launches listed as running before the commit: %+v, %v; want none", ls, err)
	}
	// The gap is real: the store has the launch still running.
	sl, err := td.d.store.GetLaunch(ctx, resp.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sl.State != api.StateRunning && sl.State != api.StateStarting {
		t.Fatalf("stored state %s before the commit: the hook did not hold the settlement before it", sl.State)
	}
	dir := launchdir.Dir(td.runtime, resp.ID)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the launch directory is gone before the outcome's commit: %v", err)
	}

	// The daemon ends in the gap; the next one settles what it left.
	td.stop()
	td2 := startDaemonIn(t, td.root, Options{})
	var got *api.Launch
	waitFor(t, "the next daemon to settle the launch", func() bool {
		got, err = td2.c.Get(ctx, resp.ID)
		return err == nil && got.State != api.StateRunning && got.State != api.StateStarting
	})
	if got.State != api.StateExited || got.ExitCode == nil || *got.ExitCode != 7 {
		t.Fatalf("after the daemon ended before the commit, the next daemon recorded state %s exit %v error %+v; want exited 7", got.State, got.ExitCode, got.Error)
	}
	waitFor(t, "the launch directory removed", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
}
