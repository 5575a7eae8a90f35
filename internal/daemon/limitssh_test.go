package daemon

import (
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/connlimit"
)

// TestLimitSSHAnswersPastBudget: a connection to an ssh broker listener past the daemon's
// budget of broker connections gets the broker's answer (the Refusal it passed, with the
// reason) after its first bytes, not a bare close.
func TestLimitSSHAnswersPastBudget(t *testing.T) {
	t.Parallel()
	d := &Daemon{conns: connlimit.NewBudget(0), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "leg.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	bounded := d.limitSSH(ln, "ssh leg example.com", "L", func(c net.Conn, reason string) {
		c.Write([]byte("refused: " + reason + "\n"))
	})
	go bounded.Accept() // refuses every connection: the budget is 0
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n"))
	b, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "refused: the daemon holds the most broker connections it may") {
		t.Fatalf("a connection past the daemon's budget got %q, want the broker's refusal with the reason", b)
	}
}
