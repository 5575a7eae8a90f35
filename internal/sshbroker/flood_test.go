package sshbroker

import (
	"net"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestAgentFloodBounded (issue #21, item 10): a box that floods its agent socket with requests
// the broker refuses adds a bounded number of lines to the daemon's log: past the launch's
// record budget (internal/recordlimit: 512 at once, 1 a second) the requests are counted, and
// their count is logged in one summary line (count=…, reason=rate_limited) when the broker
// closes. Without the limit every request is a line, and the test fails.
func TestAgentFloodBounded(t *testing.T) {
	const n = 3000
	l, log := startNoAgent(t)
	c, err := net.Dial("unix", l.AgentSocket())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range n {
		// SSH_AGENTC_ADD_IDENTITY with no key: refused by the broker, never forwarded.
		if _, err := c.Write(frame([]byte{17})); err != nil {
			t.Fatal(err)
		}
		if b, err := readFrame(c); err != nil || len(b) != 1 || b[0] != msgFailure {
			t.Fatalf("request %d: %x %v, want failure", i, b, err)
		}
	}
	elapsed := time.Since(start)
	c.Close()
	l.Close()

	lines := log.lines("ssh agent", "op=add ")
	secs := int(elapsed/time.Second) + 1
	allowed := 512 + secs + secs/10 + 1
	t.Logf("%d refused agent requests in %v: %d log lines, %d bytes of log", n, elapsed.Round(time.Millisecond), len(lines), len(log.String()))
	if len(lines) > allowed {
		t.Errorf("%d log lines for %d refused requests, want at most %d (the launch's record budget)", len(lines), n, allowed)
	}
	counted, summaries := 0, 0
	countRE := regexp.MustCompile(` count=(\d+) reason=rate_limited`)
	for _, ln := range lines {
		if m := countRE.FindStringSubmatch(ln); m != nil {
			k, _ := strconv.Atoi(m[1])
			counted += k
			summaries++
		} else {
			counted++
		}
	}
	if summaries == 0 {
		t.Errorf("no summary line counts the requests held back")
	}
	if counted != n {
		t.Errorf("the log accounts for %d requests, want %d", counted, n)
	}
}
