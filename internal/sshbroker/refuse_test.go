package sshbroker

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// TestPastCapShownToClient (issue 21, abuse11's audit): a connection past a launch's cap is
// answered in its client's terms instead of being closed unanswered. A real ssh through a leg
// that holds DefaultMaxConns connections prints the broker's reason ("Received disconnect from
// … agentbox: ssh connection to HOST refused: the box holds 8 connections to it at once …");
// a real ssh-add on an agent socket that holds DefaultMaxConns connections gets the agent's
// failure reply ("agent refused operation"). Before, both were closed unanswered: ssh printed
// only "kex_exchange_identification: Connection closed by remote host", and ssh-add died of
// SIGPIPE, printing nothing.
func TestPastCapShownToClient(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})

	// The leg: eight connections served (each gets the server's identification through it).
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < DefaultMaxConns; i++ {
		c, err := net.Dial("tcp", "127.0.0.1:"+itoa(r.fw.port))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "SSH-2.0-") || strings.Contains(line, "agentbox") {
			t.Fatalf("leg connection %d: %q %v, want the server's identification", i, line, err)
		}
	}
	out, err := runErrStdin(r.brokerEnv(), "", "sh", "-c", sshCommand(r.runDir, r.fw.port)+" -o BatchMode=yes "+r.server.User+"@localhost true")
	want := "agentbox: ssh connection to " + r.launch.Legs()[0].Host.String() + " refused: the box holds 8 connections to it at once"
	if err == nil || !strings.Contains(out, "Received disconnect from") || !strings.Contains(out, want) {
		t.Errorf("ssh past the leg's cap: %v\n%s\nwant it to print %q", err, out, want)
	}
	if len(r.log.lines("ssh leg: connection refused: connection budget exhausted")) == 0 {
		t.Errorf("no log line for the refused leg connection; log:\n%s", r.log)
	}

	// The agent socket: eight connections served.
	for i := 0; i < DefaultMaxConns; i++ {
		c, err := net.Dial("unix", r.launch.AgentSocket())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(frame([]byte{msgRequestIDs})); err != nil {
			t.Fatal(err)
		}
		if b, err := readFrame(c); err != nil || len(b) == 0 || b[0] == msgFailure {
			t.Fatalf("agent connection %d: %x %v, want the identities", i, b, err)
		}
	}
	out, err = runErrStdin([]string{"SSH_AUTH_SOCK=" + r.launch.AgentSocket()}, "", "ssh-add", "-l")
	if err == nil || !strings.Contains(out, "agent refused operation") {
		t.Errorf("ssh-add -l past the agent's cap: %v\n%s\nwant \"agent refused operation\"", err, out)
	}
	if len(r.log.lines("ssh agent: connection refused: connection budget exhausted")) == 0 {
		t.Errorf("no log line for the refused agent connection; log:\n%s", r.log)
	}
}

// TestDisconnectBanner: the refusal is an identification line and one well-formed packet.
func TestDisconnectBanner(t *testing.T) {
	b := disconnectBanner(strings.Repeat("x", 500))
	rest, ok := strings.CutPrefix(string(b), serverIdent)
	if !ok {
		t.Fatalf("no identification: %q", b)
	}
	p := []byte(rest)
	n := int(p[0])<<24 | int(p[1])<<16 | int(p[2])<<8 | int(p[3])
	pad := int(p[4])
	if n+4 != len(p) || (n+4)%8 != 0 || pad < 4 || p[5] != msgDisconnect {
		t.Fatalf("packet length %d, padding %d, total %d, type %d", n, pad, len(p), p[5])
	}
	if msgLen := int(p[10])<<24 | int(p[11])<<16 | int(p[12])<<8 | int(p[13]); msgLen != 400 {
		t.Fatalf("message of %d bytes, want it cut to 400", msgLen)
	}
}
