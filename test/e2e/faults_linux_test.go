//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/attack"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// Fault injection: the daemon killed at the worst moments, box-init killed from the host, a
// corrupt store, a full disk, an upstream that dies mid-stream. Each test states what must
// survive and what the client must see. Clock steps are covered at library level, with the
// session registry's injected clock (internal/relay/session TestIdleExpiry and
// TestBackwardClockStepDoesNotRevive): stepping the real clock needs root and disturbs every
// other process of the machine.

// killDaemon SIGKILLs the environment's daemon and waits until it is gone.
func (e *Env) killDaemon() {
	e.t.Helper()
	pid := e.DaemonPid()
	if pid <= 0 {
		e.t.Fatal("no daemon pid file")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		e.t.Fatalf("kill daemon %d: %v", pid, err)
	}
	eventually(e.t, "the killed daemon gone", func() bool { return !alive(pid) })
}

// startDaemon starts the environment's daemon in the background and waits until it serves.
func (e *Env) startDaemon() {
	e.t.Helper()
	if r := e.Run("", "daemon", "--detach"); r.Code != 0 {
		e.t.Fatalf("agentbox daemon --detach: exit %d: %s", r.Code, r.Stderr)
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z' && b[i+2] != 'X'
}

// shims returns the launch ids of the box shims running for this environment (their command
// line names the launch directory).
func (e *Env) shims() map[string]int {
	out := map[string]int{}
	ents, _ := os.ReadDir("/proc")
	prefix := filepath.Join(e.RuntimeDir(), "launches") + "/"
	for _, d := range ents {
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) >= 3 && args[1] == "box-shim" && strings.HasPrefix(args[2], prefix) {
			out[filepath.Base(args[2])] = atoi(d.Name())
		}
	}
	return out
}

// checkNoUnrecordedBox fails when a box of the environment runs that the daemon does not
// list as running: a box is never left unrecorded.
func (e *Env) checkNoUnrecordedBox() {
	e.t.Helper()
	running := map[string]bool{}
	for _, l := range e.Launches() {
		if l.State == api.StateRunning || l.State == api.StateStarting {
			running[l.ID] = true
		}
	}
	for id, pid := range e.shims() {
		if !running[id] && alive(pid) {
			e.t.Errorf("box shim %d of launch %s runs, but the daemon does not list it as running", pid, id)
		}
	}
}

// clearError checks that a failed client run said why, as agentbox does, and did not crash.
func clearError(t *testing.T, r Result) {
	t.Helper()
	if !strings.Contains(r.Stderr, "agentbox: ") || strings.Contains(r.Stderr, "goroutine ") || strings.Contains(r.Stderr, "panic:") {
		t.Errorf("the client's error is not a clear one (exit %d): %q", r.Code, r.Stderr)
	}
}

// TestFaultDaemonKilledDuringLaunch kills the daemon while `agentbox run -d` is in flight (as
// soon as the launch's directory appears). Whatever the moment, the client either got its
// launch id or a clear error; after a restart every box that runs is recorded as running, a
// launch whose id was printed is listed, and the daemon launches again.
func TestFaultDaemonKilledDuringLaunch(t *testing.T) {
	e := NewEnv(t)
	e.startDaemon()
	before := e.Launches()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := e.Command(ctx, "run", "-d", "sleep", "--", "1000")
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	launches := filepath.Join(e.RuntimeDir(), "launches")
	eventually(t, "a launch directory", func() bool {
		ents, _ := os.ReadDir(launches)
		return len(ents) > 0
	})
	e.killDaemon()
	err := c.Wait()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code = ee.ExitCode()
	}
	id := strings.TrimSpace(r.Stdout)
	t.Logf("client: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	if r.Code != 0 {
		clearError(t, r)
	}
	e.startDaemon()
	after := e.Launches()
	if len(after) < len(before) {
		t.Errorf("launches lost: %d before, %d after the restart", len(before), len(after))
	}
	if r.Code == 0 {
		l, ok := e.Launch(id)
		if !ok {
			t.Fatalf("the client printed launch %s but the restarted daemon does not list it", id)
		}
		t.Logf("launch %s after the restart: %s %v", id, l.State, l.Error)
	}
	// The restarted daemon settles what it re-adopted or recorded as failed: give it the
	// time to, then no box runs unrecorded.
	eventually(t, "no launch left starting", func() bool {
		for _, l := range e.Launches() {
			if l.State == api.StateStarting {
				return false
			}
		}
		return true
	})
	e.checkNoUnrecordedBox()
	if r := e.Box("echo again"); r.Code != 0 || r.Stdout != "again\n" {
		t.Errorf("launch after the restart: exit %d, %q, %q", r.Code, r.Stdout, r.Stderr)
	}
}

// TestFaultDaemonKilledDuringStream kills the daemon while a box streams output to an
// attached client and while a relay stream is open on a session made by hand. The box's
// stream carries on (the shim holds it, not the daemon) to the program's exit code; the relay
// client sees its stream cut, never a stream that looks complete; after a restart the launch
// is recorded with its exit code and the session is still live and works.
func TestFaultDaemonKilledDuringStream(t *testing.T) {
	hold := make(chan struct{})
	e, up := relayEnvWith(t, llmtest.Options{Credential: hostCredential, Pace: func(ctx context.Context, i int, ev string) error {
		if i == 2 {
			select {
			case <-hold:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}})
	_ = up
	e.startDaemon()
	s := e.createSession("faults")

	// The console stream: a box that prints, waits for a file, prints again.
	flag := filepath.Join(e.Work, "go-on")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := e.Command(ctx, "run", "sh", "--", "-c", "echo first; while [ ! -e "+flag+" ]; do sleep 0.05; done; echo second; exit 7")
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(stdout)
	if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("first line: %q, %v (%s)", line, err, errb.String())
	}

	// The relay stream, held after its first events.
	streamDone := make(chan error, 1)
	var streamed bytes.Buffer
	go func() {
		req, _ := http.NewRequest("POST", s.RelayURL+"/sandbox/anthropic/v1/messages",
			strings.NewReader(`{"model":"claude-test","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("X-Agentbox-Pairing", s.Pairing)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			streamDone <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			streamDone <- fmt.Errorf("relay answered %d: %s", resp.StatusCode, b)
			return
		}
		_, err = io.Copy(&streamed, resp.Body)
		streamDone <- err
	}()
	eventually(t, "the relay stream open", func() bool { return len(up.Requests()) > 0 })

	e.killDaemon()
	close(hold)
	serr := <-streamDone
	t.Logf("relay stream after the kill: err %v, %d bytes", serr, streamed.Len())
	if serr == nil && strings.Contains(streamed.String(), "message_stop") {
		t.Errorf("the relay stream completed although the daemon was killed mid-stream")
	}
	if serr == nil && !strings.Contains(streamed.String(), "event: error") {
		t.Errorf("the relay stream ended cleanly after the kill, without an error: the client cannot tell it was cut:\n%s", streamed.String())
	}

	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(br)
	err = c.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || string(rest) != "second\n" {
		t.Fatalf("attached client after the daemon's death: %v, rest %q, stderr %q", err, rest, errb.String())
	}

	e.startDaemon()
	var id string
	eventually(t, "the launch recorded as exited with its code", func() bool {
		for _, l := range e.Launches() {
			if l.Program == "sh" {
				id = l.ID
				return l.State == api.StateExited && l.ExitCode != nil && *l.ExitCode == 7
			}
		}
		return false
	})
	var live bool
	for _, x := range e.sessions() {
		if x.ID == s.ID && x.State == "live" {
			live = true
		}
	}
	if !live {
		t.Errorf("session %s is not live after the restart: %+v", s.ID, e.sessions())
	}
	// The restarted relay serves the same pairing (the stream now completes).
	req, _ := http.NewRequest("POST", s.RelayURL+"/sandbox/anthropic/v1/messages", strings.NewReader(messagesBody))
	req.Header.Set("X-Agentbox-Pairing", s.Pairing)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("relay after the restart: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("relay after the restart answered %d to the surviving session (launch %s)", resp.StatusCode, id)
	}
}

// createSession makes a session by hand (`agentbox session create --json`).
func (e *Env) createSession(client string) api.SessionCreated {
	e.t.Helper()
	r := e.Run("", "session", "create", "--client", client, "--json")
	var s api.SessionCreated
	if r.Code != 0 {
		e.t.Fatalf("session create: exit %d: %s", r.Code, r.Stderr)
	}
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil || s.Pairing == "" || s.RelayURL == "" {
		e.t.Fatalf("session create: %v: %s", err, r.Stdout)
	}
	return s
}

// sessions returns `agentbox session list --json`.
func (e *Env) sessions() []api.Session {
	e.t.Helper()
	r := e.Run("", "session", "list", "--json")
	var ss []api.Session
	if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &ss) != nil {
		e.t.Fatalf("session list: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
	return ss
}

// TestFaultUpstreamDiesMidStream: the fake upstream ends a stream abruptly after its first
// events. The client of the relay sees the stream cut (an error, or an in-stream error event),
// never a stream that looks complete, and the daemon keeps serving the next request.
func TestFaultUpstreamDiesMidStream(t *testing.T) {
	// The upstream's connection is cut mid-response, without the stream's terminating chunk:
	// what a crashed or unplugged upstream does. (llmtest's Pace error ends the response
	// cleanly, which a relay cannot tell from a stream that ended.)
	e, _ := relayEnvWith(t, llmtest.Options{Credential: hostCredential, Pace: func(ctx context.Context, i int, ev string) error {
		if i == 2 {
			panic(http.ErrAbortHandler)
		}
		return nil
	}})
	e.startDaemon()
	s := e.createSession("faults")
	post := func(body string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", s.RelayURL+"/sandbox/anthropic/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Agentbox-Pairing", s.Pairing)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		return http.DefaultClient.Do(req)
	}
	resp, err := post(`{"model":"claude-test","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("status %d, read error %v, body:\n%s", resp.StatusCode, rerr, b)
	if resp.StatusCode == 200 && rerr == nil && !bytes.Contains(b, []byte("event: error")) {
		t.Errorf("the cut stream reached the client as a clean end, without an error")
	}
	if bytes.Contains(b, []byte("message_stop")) {
		t.Errorf("the cut stream looks complete (message_stop)")
	}
	resp, err = post(messagesBody)
	if err != nil {
		t.Fatalf("the daemon stopped serving after the upstream died: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("next request: %d", resp.StatusCode)
	}
}

// TestFaultBoxInitKilled SIGKILLs a box's init from the host: the launch ends (recorded as
// exited, settled), nothing of its pid namespace remains, and the daemon keeps launching.
func TestFaultBoxInitKilled(t *testing.T) {
	e := NewEnv(t)
	id := e.Detach("sh", "--", "-c", `(setsid sleep 1001 &); exec sleep 1000`)
	l := e.WaitLaunch(id, "running", func(l api.Launch) bool { return l.State == api.StateRunning && l.BoxPid > 0 })
	ns := pidNamespace(t, l.BoxPid)
	if err := syscall.Kill(l.BoxPid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill box-init %d: %v", l.BoxPid, err)
	}
	l = e.WaitLaunch(id, "ended and settled", func(l api.Launch) bool { return ended(l) && l.Settled })
	if l.ExitCode != nil {
		t.Logf("after box-init was killed: state %s, exit code %d", l.State, *l.ExitCode)
	}
	if l.State != api.StateExited {
		t.Errorf("state %s, want exited", l.State)
	}
	if left, _ := attack.ProcessesIn(ns); len(left) > 0 {
		t.Errorf("processes of the box remain: %v", left)
	}
	if _, err := os.Stat(launchdir.Dir(e.RuntimeDir(), id)); err == nil {
		t.Logf("launch directory kept after the end (%s)", id)
	}
	if r := e.Box("echo again"); r.Code != 0 || r.Stdout != "again\n" {
		t.Errorf("launch after box-init was killed: exit %d, %q, %q", r.Code, r.Stdout, r.Stderr)
	}
}

// TestFaultCorruptStateFile starts a daemon on a store that is not a database. The start
// fails with an error that names the file; the file is left as it was (no silent reset, no
// launch history thrown away); moving it aside lets the daemon start afresh.
func TestFaultCorruptStateFile(t *testing.T) {
	e := NewEnv(t)
	e.startDaemon()
	if r := e.Box("true"); r.Code != 0 {
		t.Fatalf("first launch: %d %s", r.Code, r.Stderr)
	}
	pid := e.DaemonPid()
	e.Run("", "daemon", "stop")
	// Its last checkpoint must not overwrite the corruption.
	eventually(t, "the stopped daemon gone", func() bool { return !alive(pid) })
	db := filepath.Join(e.State, "agentbox", "agentbox.db")
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(db + suffix)
	}
	junk := bytes.Repeat([]byte("this is not an SQLite database\n"), 256)
	if err := os.WriteFile(db, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.Run("", "daemon", "--detach")
	t.Logf("daemon on a corrupt store: exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	if r.Code == 0 {
		if ls := e.Launches(); ls != nil {
			t.Errorf("the daemon started on a corrupt store and serves %d launches: a silent reset", len(ls))
		}
	}
	logs, _ := os.ReadFile(filepath.Join(e.State, "agentbox", "daemon.log"))
	t.Logf("daemon.log tail: %s", faultTail(string(logs), 600))
	if !strings.Contains(string(logs), "agentbox.db") {
		t.Errorf("the daemon's log does not name the corrupt store")
	}
	// The person who ran the command must learn why, not only that no daemon answers.
	if !strings.Contains(r.Stderr, "agentbox.db") && !strings.Contains(r.Stderr, "daemon.log") {
		t.Errorf("`agentbox daemon --detach` on a corrupt store says neither what failed nor where to look: %q", r.Stderr)
	}
	if b, err := os.ReadFile(db); err != nil || !bytes.Equal(b, junk) {
		t.Errorf("the corrupt store was changed or removed (%v): evidence lost", err)
	}
	// Recovery: the user moves it aside, and the daemon starts with an empty store.
	if err := os.Rename(db, db+".corrupt"); err != nil {
		t.Fatal(err)
	}
	e.startDaemon()
	if r := e.Box("echo recovered"); r.Code != 0 || r.Stdout != "recovered\n" {
		t.Errorf("launch after recovery: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
}

func faultTail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestFaultDiskFull puts the state directory on a small tmpfs and fills it. Launches are
// refused with a clear error (a box is never started unrecorded), what was recorded before
// stays readable, and the daemon keeps serving; once space is back, launches work again.
func TestFaultDiskFull(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a small tmpfs as the state directory needs root")
	}
	e := NewEnv(t)
	if err := syscall.Mount("tmpfs", e.State, "tmpfs", 0, "size=4m,mode=0700"); err != nil {
		testenv.NoBoxes(t, "mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(e.State, syscall.MNT_DETACH) })
	e.startDaemon()
	first := e.Detach("sleep", "--", "1000")
	e.WaitLaunch(first, "running", func(l api.Launch) bool { return l.State == api.StateRunning })
	filler := filepath.Join(e.State, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(f, io.LimitReader(zeroReader{}, 16<<20)) // until ENOSPC
	f.Close()
	refused := 0
	for i := 0; i < 3; i++ {
		r := e.Run("", "run", "sh", "--", "-c", "echo ran")
		t.Logf("launch on a full disk: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
		if r.Code != 0 {
			refused++
			clearError(t, r)
			if strings.Contains(r.Stdout, "ran") {
				t.Errorf("the program ran although the launch was refused")
			}
		}
	}
	if refused == 0 {
		t.Log("every launch succeeded on the full disk (SQLite found room in its WAL): checking the record instead")
	}
	e.checkNoUnrecordedBox()
	if l, ok := e.Launch(first); !ok || l.State != api.StateRunning {
		t.Errorf("the launch recorded before the disk filled is %+v (found %v)", l, ok)
	}
	os.Remove(filler)
	if r := e.Box("echo again"); r.Code != 0 || r.Stdout != "again\n" {
		t.Errorf("launch after space came back: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := e.Run("", "stop", first); r.Code != 0 {
		t.Errorf("stop %s: %s", first, r.Stderr)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestFaultDaemonKilledDuringGitClone kills the daemon while a box's git clone is mid-pack
// (the remote holds the pack after its first 256 KiB). The clone fails with git's own error,
// the box survives, and after a restart the re-adopted box's relay channel and pairing work
// again: a second clone from the same box succeeds and the launch is recorded to its end.
func TestFaultDaemonKilledDuringGitClone(t *testing.T) {
	gitTools(t)
	rm := newGitRemote(t)
	rm.bigRepo("big.git", 4<<20)
	rm.newRepo("small.git")
	rm.commit("small.git", "README", "small\n")
	e := gitEnv(t, rm, []string{"big.git", "small.git"}, nil)
	e.startDaemon()
	g := rm.holdPack("big.git", 256<<10)
	script := boxGit + `git clone --progress ` + rm.url("big.git") + ` big > clone.out 2>&1; echo "exit=$?" >> clone.out; touch cloned; ` +
		`while [ ! -e go ]; do sleep 0.05; done; ` +
		`git clone ` + rm.url("small.git") + ` small > next.out 2>&1; echo "exit=$?" >> next.out; touch done`
	id := e.Detach("sh", "--", "-c", script)
	eventually(t, "the pack in flight", func() bool {
		select {
		case <-g.started:
			return true
		default:
			return false
		}
	})
	e.killDaemon()
	eventually(t, "the clone to end", func() bool { _, err := os.Stat(filepath.Join(e.Work, "cloned")); return err == nil })
	close(g.release)
	clone, _ := os.ReadFile(filepath.Join(e.Work, "clone.out"))
	t.Logf("clone while the daemon died:\n%s", faultTail(string(clone), 800))
	if strings.Contains(string(clone), "exit=0") {
		t.Errorf("the clone reported success although the daemon died mid-pack")
	}
	if !strings.Contains(string(clone), "fatal:") && !strings.Contains(string(clone), "error:") {
		t.Errorf("git printed no error for the cut clone")
	}
	e.startDaemon()
	l := e.WaitLaunch(id, "re-adopted", func(l api.Launch) bool { return l.State == api.StateRunning })
	if !alive(l.BoxPid) {
		t.Fatalf("the box %d did not survive the daemon's death", l.BoxPid)
	}
	if err := os.WriteFile(filepath.Join(e.Work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second clone to end", func() bool { _, err := os.Stat(filepath.Join(e.Work, "done")); return err == nil })
	next, _ := os.ReadFile(filepath.Join(e.Work, "next.out"))
	if !strings.Contains(string(next), "exit=0") {
		t.Errorf("a clone after the restart failed: the re-adopted box's relay channel or pairing did not survive:\n%s", next)
	}
	e.WaitLaunch(id, "exited", func(l api.Launch) bool { return l.State == api.StateExited && l.ExitCode != nil })
}

// TestDaemonStop: `agentbox daemon stop` returns once the daemon has exited, so the next
// command starts a new daemon rather than reaching the one shutting down; a pid file naming
// another process gets it no signal; with no daemon, it says so.
func TestDaemonStop(t *testing.T) {
	e := NewEnv(t)
	e.startDaemon()
	if r := e.Box("true"); r.Code != 0 {
		t.Fatalf("first launch: %d %s", r.Code, r.Stderr)
	}
	pid := e.DaemonPid()
	if r := e.Run("", "daemon", "stop", "--timeout", "0s"); r.Code == 0 || !strings.Contains(r.Stderr, "--timeout") || !alive(pid) {
		t.Errorf("daemon stop --timeout 0s: exit %d, %q; daemon alive %v (want refused before any signal)", r.Code, r.Stderr, alive(pid))
	}
	if r := e.Run("", "daemon", "stop"); r.Code != 0 || !strings.Contains(r.Stdout, fmt.Sprintf("stopped daemon %d", pid)) {
		t.Fatalf("daemon stop: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if alive(pid) {
		t.Errorf("daemon %d still runs after daemon stop returned", pid)
	}
	if r := e.Box("echo again"); r.Code != 0 || r.Stdout != "again\n" {
		t.Errorf("launch right after daemon stop: exit %d, %q, %q", r.Code, r.Stdout, r.Stderr)
	}
	// The pid file names another process of the user: it is not signalled.
	other := exec.Command("sleep", "1000")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	daemon := e.DaemonPid()
	pidFile := filepath.Join(e.RuntimeDir(), "daemon.pid")
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n", other.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.Run("", "daemon", "stop")
	if r.Code == 0 || !strings.Contains(r.Stderr, "not signalled") {
		t.Errorf("daemon stop with a pid file naming another process: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if !alive(other.Process.Pid) || !alive(daemon) {
		t.Errorf("after a refused stop: the other process alive %v, the daemon alive %v", alive(other.Process.Pid), alive(daemon))
	}
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n", daemon)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.Run("", "daemon", "stop"); r.Code != 0 || alive(daemon) {
		t.Fatalf("daemon stop: exit %d: %s %s (daemon alive %v)", r.Code, r.Stdout, r.Stderr, alive(daemon))
	}
	if r := e.Run("", "daemon", "stop"); r.Code == 0 || !strings.Contains(r.Stderr, "no daemon is running") {
		t.Errorf("daemon stop with no daemon: exit %d: %s %s", r.Code, r.Stdout, r.Stderr)
	}
}
