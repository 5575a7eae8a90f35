package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/store"
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
	// (settleWait: the stop waits for the held settlement 1 ms, not settleWait: as if killed.)
	td := startDaemonOpts(t, Options{settleWait: time.Millisecond, afterEnded: func(id string) {
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

// exitLaunch starts a detached `sh -c "exit 7"` in td's workspace and answers its id.
func exitLaunch(t *testing.T, td *testDaemon) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := td.c.Launch(context.Background(), &api.LaunchRequest{Program: "sh", Path: sh, Args: []string{"-c", "exit 7"}, Workspace: td.work, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	return resp.ID
}

// storedLaunch reads launch id from the store file of the daemon whose folders are under root,
// with no daemon running: what the last one committed.
func storedLaunch(t *testing.T, root, id string) *store.Launch {
	t.Helper()
	st, err := store.Open(filepath.Join(root, "state", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sl, err := st.GetLaunch(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sl
}

// TestStopCommitsSettlementUnderWay guards the daemon's stop against a launch whose end it is
// settling: `agentbox run true && agentbox daemon stop` stopped the daemon between the
// answer to the client and the outcome's commit, which then failed on the closed store ("sql:
// database is closed") and the launch directory went with it: no ended launch was recorded
// (e2e TestLaunchesListing failed so). The stop now waits for settlements under way
// (awaitSettlements): the hook holds the settlement until the stop has begun; once the stop
// returns, the store on disk has the launch exited 7 and its directory is gone.
func TestStopCommitsSettlementUnderWay(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	reached := make(chan string, 1)
	td := startDaemonOpts(t, Options{afterEnded: func(id string) {
		reached <- id
		<-release
	}})
	id := exitLaunch(t, td)
	select {
	case got := <-reached:
		if got != id {
			t.Fatalf("the hook held launch %s, want %s", got, id)
		}
	case <-time.After(time.Minute):
		t.Fatal("the launch's end was not settled within a minute")
	}
	stopped := make(chan struct{})
	go func() { td.stop(); close(stopped) }()
	// Release the settlement once the stop has begun (or, without the wait, has ended).
	began := func() bool {
		td.d.mu.Lock()
		defer td.d.mu.Unlock()
		return td.d.stopping
	}
	waitFor(t, "the daemon's stop to begin", func() bool {
		select {
		case <-stopped:
			return true
		default:
			return began()
		}
	})
	close(release)
	<-stopped
	sl := storedLaunch(t, td.root, id)
	if sl.State != api.StateExited || sl.ExitCode == nil || *sl.ExitCode != 7 {
		t.Fatalf("after the stop, the store has the launch %s exit %v; want exited 7 (the stop closed the store before the outcome's commit)", sl.State, sl.ExitCode)
	}
	if _, err := os.Stat(launchdir.Dir(td.runtime, id)); !os.IsNotExist(err) {
		t.Fatalf("the launch directory after its outcome's commit: %v, want it removed", err)
	}
}

// finishFailingStore refuses every launch's final record.
type finishFailingStore struct{ launchStore }

func (f finishFailingStore) Finish(context.Context, *store.Launch) error { return errInjected }

// TestFailedRecordKeepsLaunchDir guards the outcome of a launch whose final record fails (a
// full disk, a store closed under it): its directory, which holds the status its shim left,
// stayed removed, so the next daemon found the launch running with nothing to settle it from
// and recorded it lost. Now the directory stays, and the next daemon records the outcome.
func TestFailedRecordKeepsLaunchDir(t *testing.T) {
	t.Parallel()
	ended := make(chan string, 1)
	td := startDaemonOpts(t, Options{
		wrapStore:  func(s launchStore) launchStore { return finishFailingStore{s} },
		afterEnded: func(id string) { ended <- id },
	})
	id := exitLaunch(t, td)
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatal("the launch's end was not settled within a minute")
	}
	td.stop() // (waits for the settlement, whose record fails)
	if sl := storedLaunch(t, td.root, id); sl.State != api.StateRunning && sl.State != api.StateStarting {
		t.Fatalf("stored state %s although every final record failed", sl.State)
	}
	if _, err := os.Stat(launchdir.Dir(td.runtime, id)); err != nil {
		t.Fatalf("the launch directory after its record failed: %v, want it kept for the next daemon", err)
	}
	// Meanwhile the user makes, on the host, a file the launch's protection guarded while the
	// box ran (absent at its start): the launch's end is done, so it is the user's. The next
	// daemon ran the launch's check at exit again, which took it for the box's and moved it
	// into the launch's proposed changes (review 30).
	envrc := filepath.Join(td.work, ".envrc")
	if err := os.WriteFile(envrc, []byte("export USER_MADE=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	td2 := startDaemonIn(t, td.root, Options{})
	var got *api.Launch
	var err error
	waitFor(t, "the next daemon to settle the launch", func() bool {
		got, err = td2.c.Get(context.Background(), id)
		return err == nil && got.State != api.StateRunning && got.State != api.StateStarting
	})
	if got.State != api.StateExited || got.ExitCode == nil || *got.ExitCode != 7 {
		t.Fatalf("the next daemon recorded state %s exit %v error %+v; want exited 7", got.State, got.ExitCode, got.Error)
	}
	if b, err := os.ReadFile(envrc); err != nil || string(b) != "export USER_MADE=1\n" {
		t.Errorf("the user's .envrc, made after the launch's end, after the next daemon settled the launch: %q, %v; want it untouched", b, err)
	}
}
