//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestAttackRelayPortTakeover (issue 21, finding 12): while no daemon runs, another process
// binds the relay's remembered loopback port first; the next daemon cannot listen there. The
// pairing of a session created by hand on the old address (which its client keeps sending
// there, to whoever holds the port now) must not open the relay on the new one: the replay is
// refused with pairing_invalid, the gateway never sees a request, and `agentbox info` says
// what happened. Before the fix the daemon moved silently and answered the replay with the
// user's gateway credential attached. Run by root, the squatter is another local user
// (testenv.SecondUID), who binds the port and replays the pairing it received; run by an
// ordinary user, it is the test process itself (binding a loopback port is open to every
// local user, so the daemon meets the same refusal whoever holds it).
func TestAttackRelayPortTakeover(t *testing.T) {
	e, up := relayEnvWith(t, llmtest.Options{})
	r := e.Run("", "session", "create", "--client", "tool", "--json")
	if r.Code != 0 {
		t.Fatalf("session create: exit %d: %s", r.Code, r.Stderr)
	}
	var s api.SessionCreated
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
		t.Fatalf("session create --json: %v: %s", err, r.Stdout)
	}
	old, err := url.Parse(s.RelayURL)
	if err != nil {
		t.Fatal(err)
	}

	pid := e.DaemonPid()
	if pid == 0 {
		t.Fatal("no daemon pid")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	e.waitDaemonGone(t, pid)
	// The kernel frees the port once the killed daemon's descriptors are closed.
	replay := squatRelayPort(t, old.Host)

	// The next daemon (started by this command) listens where it can: on a new port.
	r = e.Run("", "session", "create", "--client", "probe", "--json")
	if r.Code != 0 {
		t.Fatalf("session create after the restart: exit %d: %s", r.Code, r.Stderr)
	}
	var fresh api.SessionCreated
	if err := json.Unmarshal([]byte(r.Stdout), &fresh); err != nil {
		t.Fatal(err)
	}
	now, err := url.Parse(fresh.RelayURL)
	if err != nil {
		t.Fatal(err)
	}
	if now.Host == old.Host {
		t.Fatalf("the next daemon listens on %s, which the squatter holds", now.Host)
	}

	// The squatter replays the pairing it received on the old address at the new one.
	before := len(up.Requests())
	status, body := replay(fresh.RelayURL+"/sandbox/anthropic/v1/messages", s.Pairing)
	if status != http.StatusForbidden || !strings.Contains(body, "pairing_invalid") {
		t.Errorf("the pairing issued on the taken address, replayed on the new one: %d %s, want 403 pairing_invalid", status, body)
	}
	if n := len(up.Requests()); n != before {
		t.Errorf("the gateway got %d request(s) from the replay", n-before)
	}

	// The user is told: `agentbox info` names the taken address and the revoked session.
	r = e.Run("", "info")
	if r.Code != 0 || !strings.Contains(r.Stderr, old.Host) || !strings.Contains(r.Stderr, s.ID) {
		t.Errorf("agentbox info does not say the relay's address %s was taken and session %s revoked: exit %d\n%s", old.Host, s.ID, r.Code, r.Stderr)
	}
	// A session made after the move works on the new address.
	req, _ := http.NewRequest(http.MethodPost, fresh.RelayURL+"/sandbox/anthropic/v1/messages", strings.NewReader(messagesBody))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", fresh.Pairing)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a session created after the move: %s, want 200", resp.Status)
	}
}

// squatRelayPort binds addr (a loopback host:port) once it is free, for the test's life, and
// returns how the squatter sends a request with a pairing: run by root, as another local user
// (testenv.SecondUID, a python3 process that binds the port and, asked on its stdin, posts the
// request from its own uid); otherwise as the test process.
func squatRelayPort(t *testing.T, addr string) (replay func(url, pairing string) (int, string)) {
	t.Helper()
	post := func(url, pairing string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(messagesBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("content-type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("x-api-key", pairing)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	if os.Geteuid() != 0 {
		var squat net.Listener
		eventually(t, "the relay's port "+addr+" taken by another process", func() bool {
			var err error
			squat, err = net.Listen("tcp", addr)
			return err == nil
		})
		t.Cleanup(func() { squat.Close() })
		return post
	}
	const python = "/usr/bin/python3" // the system's: root's PATH may lead into /root
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 to run the other user's squatter")
	}
	host, port, _ := net.SplitHostPort(addr)
	const squatter = `import json, socket, sys, time, urllib.request
s = socket.socket()
for _ in range(400):
    try:
        s.bind((sys.argv[1], int(sys.argv[2])))
        break
    except OSError:
        time.sleep(0.025)
else:
    print("could not bind", flush=True)
    sys.exit(1)
s.listen(16)
print("squatting", flush=True)
for line in sys.stdin:
    url, pairing, body = json.loads(line)
    req = urllib.request.Request(url, data=body.encode(), method="POST", headers={
        "content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": pairing})
    try:
        with urllib.request.urlopen(req) as r:
            print(json.dumps({"status": r.status, "body": r.read().decode()}), flush=True)
    except urllib.error.HTTPError as e:
        print(json.dumps({"status": e.code, "body": e.read().decode()}), flush=True)
`
	cmd := exec.Command(python, "-c", squatter, host, port)
	cmd.SysProcAttr = testenv.AsUser(testenv.SecondUID)
	cmd.Dir = "/"
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := bufio.NewReader(outPipe)
	if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "squatting" {
		t.Fatalf("uid %d could not take the relay's port %s: %q %v", testenv.SecondUID, addr, line, err)
	}
	return func(url, pairing string) (int, string) {
		b, _ := json.Marshal([]string{url, pairing, messagesBody})
		if _, err := in.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		line, err := out.ReadString('\n')
		var answer struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		}
		if err != nil || json.Unmarshal([]byte(line), &answer) != nil {
			t.Fatalf("uid %d's request: %q %v", testenv.SecondUID, line, err)
		}
		return answer.Status, answer.Body
	}
}
