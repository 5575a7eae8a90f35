package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/store"
)

// heldRecordStore holds each launch's first record (CreateLaunch) until the test gives its
// outcome: nil commits it, an error fails it.
type heldRecordStore struct {
	launchStore
	reached chan string
	outcome chan error
}

func (h *heldRecordStore) CreateLaunch(ctx context.Context, l *store.Launch, sessions ...store.Session) error {
	h.reached <- l.ID
	if err := <-h.outcome; err != nil {
		return err
	}
	return h.launchStore.CreateLaunch(ctx, l, sessions...)
}

// TestProgramWaitsForItsRecord guards the answer before the record's commit (an attached launch
// handed to a spare shim, as `agentbox run` makes them): the client is answered and attaches
// while the launch's record is still being committed, and its program must not run until the
// record is committed. When the record fails, the program never runs (the client is told the
// box failed to start), nothing of the launch is recorded and its shim and
// directory go; when it is committed, the program runs and its exit code reaches the client.
// (Without the shim's wait for the daemon's word, the client's attach released the program
// with its record still uncommitted, and a record that failed then left a program that had
// run unrecorded.)
func TestProgramWaitsForItsRecord(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, fail := range []bool{true, false} {
		t.Run(map[bool]string{true: "RecordFails", false: "RecordCommitted"}[fail], func(t *testing.T) {
			t.Parallel()
			hs := &heldRecordStore{reached: make(chan string, 1), outcome: make(chan error, 1)}
			td := startDaemonWith(t, func(s launchStore) launchStore { hs.launchStore = s; return hs }, false)
			var spare int // the shim the launch is handed to
			waitFor(t, "a spare shim", func() bool { spare = td.spareShim(); return spare != 0 })
			ctx := context.Background()
			marker := filepath.Join(td.work, "ran")
			type answer struct {
				resp *api.LaunchResponse
				err  error
			}
			answered := make(chan answer, 1)
			go func() {
				resp, err := td.c.Launch(ctx, &api.LaunchRequest{Program: "sh", Path: sh, Args: []string{"-c", "echo ran > " + marker + "; exit 3"}, Workspace: td.work})
				answered <- answer{resp, err}
			}()
			var id string
			select {
			case id = <-hs.reached:
			case <-time.After(time.Minute):
				t.Fatal("the launch's record was not begun within a minute")
			}
			var resp *api.LaunchResponse
			select {
			case a := <-answered:
				if a.err != nil {
					hs.outcome <- errInjected
					t.Fatal(a.err)
				}
				resp = a.resp
			case <-time.After(time.Minute):
				hs.outcome <- errInjected
				t.Fatal("the client was not answered while its launch's record was being committed")
			}
			if resp.ID != id {
				t.Fatalf("answered launch %s, the record held is %s", resp.ID, id)
			}
			// The client attaches while the record is held.
			in, out, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			defer out.Close()
			null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			type result struct {
				code int
				err  error
			}
			attached := make(chan result, 1)
			go func() {
				code, err := console.Attach(resp.ShimSocket, in, null, null, console.AttachOptions{NoSignals: true})
				attached <- result{code, err}
			}()
			shimLog := filepath.Join(launchdir.Dir(td.runtime, id), launchdir.ShimLogFile)
			waitFor(t, "the client attached at the shim", func() bool {
				b, _ := os.ReadFile(shimLog)
				return strings.Contains(string(b), "console client attached")
			})
			if _, err := os.Stat(marker); err == nil {
				hs.outcome <- errInjected
				t.Fatal("the program ran, its client attached, before its launch's record was committed")
			}
			if fail {
				hs.outcome <- errInjected
			} else {
				hs.outcome <- nil
			}
			var r result
			select {
			case r = <-attached:
			case <-time.After(time.Minute):
				t.Fatal("the client's attach did not end within a minute")
			}
			_, statErr := os.Stat(marker)
			if !fail {
				if r.err != nil || r.code != 3 {
					t.Fatalf("attach after the record's commit: code %d, %v; want the program's exit 3", r.code, r.err)
				}
				if statErr != nil {
					t.Fatalf("the program did not run after its record's commit: %v", statErr)
				}
				var l *api.Launch
				waitFor(t, "the launch's outcome recorded", func() bool {
					l, err = td.c.Get(ctx, id)
					return err == nil && l.State != api.StateRunning && l.State != api.StateStarting
				})
				if l.State != api.StateExited || l.ExitCode == nil || *l.ExitCode != 3 {
					t.Fatalf("recorded state %s exit %v error %+v; want exited 3", l.State, l.ExitCode, l.Error)
				}
				return
			}
			if statErr == nil {
				t.Fatal("the program ran although its launch's record failed: a program ran unrecorded")
			}
			// The shim hears of the failure twice, in either order: the hand-over's end
			// (store_failed) and the rollback's stop (stopped_before_start).
			var se *console.StartError
			if !errors.As(r.err, &se) || se.Code != api.CodeStoreFailed && se.Code != api.CodeStoppedBeforeStart {
				t.Fatalf("attach when the record failed: code %d, %v; want a start error %s or %s", r.code, r.err, api.CodeStoreFailed, api.CodeStoppedBeforeStart)
			}
			if _, err := td.d.store.GetLaunch(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the store holds the launch whose record failed: %v", err)
			}
			waitFor(t, "the shim of the unrecorded launch gone", func() bool {
				_, err := os.Stat("/proc/" + strconv.Itoa(spare))
				return os.IsNotExist(err)
			})
			waitFor(t, "the launch directory removed", func() bool {
				_, err := os.Stat(launchdir.Dir(td.runtime, id))
				return os.IsNotExist(err)
			})
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the program ran after its launch's record failed")
			}
		})
	}
}
