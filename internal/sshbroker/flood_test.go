package sshbroker

import (
	"net"
	"regexp"
	"strconv"
	"strings"
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

// TestAllowedSignWrittenPastTheRate (review 10, F7): after a flood of refused signatures that
// spends the launch's record rate, a signature with the granted key is still written as a line
// of its own, naming the key: a box cannot hide what it signed behind refusals. Without
// AdmitAllowed for allowed lines it is only counted into a summary (reason=rate_limited) that
// names no key, and the test fails. The summary of the refusals names the key they asked for,
// with its count (issue #21; without the summary's tally it names none, and the test fails).
func TestAllowedSignWrittenPastTheRate(t *testing.T) {
	r := newRig(t, rigOptions{})
	c := dialAgent(t, r.launch.AgentSocket())
	data := []byte("review 10 F7")
	for i := range 600 {
		if _, err := c.Sign(r.other.Pub, data); err == nil {
			t.Fatalf("sign %d with the other key succeeded", i)
		}
	}
	if _, err := c.Sign(r.granted.Pub, data); err != nil {
		t.Fatalf("sign with the granted key: %v", err)
	}
	r.launch.Close()
	var own []string
	for _, ln := range r.log.lines("op=sign", "decision=allow", "key="+r.granted.FP) {
		if !strings.Contains(ln, "rate_limited") {
			own = append(own, ln)
		}
	}
	if len(own) != 1 {
		t.Errorf("want the granted key's signature as one line of its own after 600 refusals, got %d; log:\n%s", len(own), r.log)
	}
	sums := r.log.lines("op=sign", "decision=deny", "reason=rate_limited")
	if len(sums) != 1 || !strings.Contains(sums[0], "targets="+r.other.FP+"*") {
		t.Errorf("summary of the refused signatures %q, want one naming %s with its count", sums, r.other.FP)
	}
}
