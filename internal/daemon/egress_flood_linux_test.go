package daemon

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/recordlimit"
	"github.com/agentbox/agentbox/internal/relay/session"
	"github.com/agentbox/agentbox/internal/store"
)

// countWriter counts the bytes and lines written to it.
type countWriter struct{ bytes, lines atomic.Int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.bytes.Add(int64(len(p)))
	w.lines.Add(int64(strings.Count(string(p), "\n")))
	return len(p), nil
}

// storeBytes is the size of the store's files (the database and its write-ahead log).
func storeBytes(t testing.TB, dbPath string) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{dbPath, dbPath + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		} else if !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	return n
}

// floodBound is what a launch's record budget lets through a flood that lasted elapsed: the
// burst, the refill over the flood's duration, and a summary per kind of record every
// recordlimit.SummaryEvery and at the end.
func floodBound(elapsed time.Duration, kinds int64) int64 {
	secs := int64(elapsed/time.Second) + 1
	return recordlimit.Burst + secs*recordlimit.Refill + kinds*(secs/int64(recordlimit.SummaryEvery/time.Second)+1)
}

// TestEgressFloodBounded (issue #21, finding 10): a box that floods its egress proxy with
// refused CONNECTs, with its own pairing, over the launch's real socket, into a real store on
// disk, adds a bounded number of log lines and audit rows: past recordlimit.Burst the
// requests are counted, not written, and the count is written as a summary row. The totals
// rebuilt from the audit rows after the launch ended and the store was reopened (as a
// restarted daemon does) still count every request. Without the rate limit the store gets one
// row and the log one line per request, and the test fails.
func TestEgressFloodBounded(t *testing.T) {
	t.Parallel()
	const flood = 3000
	r := newAuditRig(t)
	var logw countWriter
	r.d.log = slog.New(slog.NewTextHandler(&logw, nil))
	r.relay.Log, r.egress.Log = r.d.log, r.d.log
	const id = "egress-flood"
	storeBefore, logBefore, linesBefore := storeBytes(t, r.dbPath), logw.bytes.Load(), logw.lines.Load()
	start := time.Now()
	floodEgress(t, r, id, flood)
	elapsed := time.Since(start)
	r.egress.End(id) // the launch ends: its proxy closes and writes what it held back
	// A restarted daemon sums the rows of the store it opens again.
	r.d.audits.Close()
	if err := r.st.Close(); err != nil {
		t.Fatal(err)
	}
	storeAfter, logAfter, linesAfter := storeBytes(t, r.dbPath), logw.bytes.Load(), logw.lines.Load()
	t.Logf("%d refused CONNECTs in %v: store %d → %d bytes (+%d), log +%d bytes, +%d lines",
		flood, elapsed.Round(time.Millisecond), storeBefore, storeAfter, storeAfter-storeBefore, logAfter-logBefore, linesAfter-linesBefore)
	st, err := store.Open(r.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r.st = st

	allowed := floodBound(elapsed, 2) // a summary of refusals, and a spare for a second decision
	rows := egressRows(t, st, id)
	if int64(len(rows)) > allowed {
		t.Errorf("%d egress audit rows for %d requests, want at most %d (rate limit)", len(rows), flood, allowed)
	}
	if lines := linesAfter - linesBefore; lines > allowed+2 {
		t.Errorf("%d log lines for %d requests, want at most %d (rate limit)", lines, flood, allowed+2)
	}
	var summarized int64
	for _, d := range rows {
		if d.Count > 0 {
			if d.Reason != egress.ReasonRateLimited || d.Decision != egress.DecisionRefuse {
				t.Errorf("summary row %+v, want a refusal marked %s", d, egress.ReasonRateLimited)
			}
			summarized += d.Count
		}
	}
	if summarized == 0 {
		t.Errorf("no summary row counts the requests held back")
	}

	tot, err := st.EgressTotals(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := tot[id]; got.Refused != flood || got.Allowed != 0 || got.Failed != 0 {
		t.Errorf("totals from the audit rows = %+v, want %d refused (every request counted)", got, flood)
	}
	if got := tot[id].LastRefused; !strings.HasSuffix(got, ".evil.test:443") {
		t.Errorf("last refused target = %q, want one of the flood's", got)
	}
}

// floodEgress starts the egress proxy of launch id in r and sends it n CONNECTs the allowlist
// refuses, each to another host, one after another, with the launch's pairing, over its socket.
func floodEgress(t *testing.T, r *auditRig, id string, n int) {
	t.Helper()
	sock := filepath.Join(startAuditEgress(t, r, id), egressSocket)
	auth := egressAuth(t, r, id)
	for i := range n {
		target := fmt.Sprintf("host%d.evil.test:443", i)
		c, status := egressConnect(t, sock, auth, target)
		c.Close()
		if status != http.StatusForbidden {
			t.Fatalf("CONNECT %s: %d, want 403 (refused by the allowlist)", target, status)
		}
	}
	// The proxy records a request after its answer: wait until it recorded all of them.
	waitFor(t, "the proxy's count of the flood", func() bool { return r.egress.launchStats(id).Refused == int64(n) })
}

// egressAuth creates launch id's pairing session in r and returns the Basic credential of its
// proxy URL, as the box gets it.
func egressAuth(t *testing.T, r *auditRig, id string) string {
	t.Helper()
	_, pairing, err := r.d.sessions.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "generic", LaunchID: id})
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString([]byte("agentbox:" + pairing.Reveal()))
}

// egressConnect asks the proxy on sock for a tunnel to target with the Basic credential auth,
// and returns the connection (the tunnel when the status is 200) and the answer's status.
func egressConnect(t *testing.T, sock, auth, target string) (net.Conn, int) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth)
	// An unbuffered read of the answer's head: what follows it on a tunnel is the upstream's.
	resp, err := http.ReadResponse(bufio.NewReaderSize(oneByteReader{c}, 16), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
	}
	return c, resp.StatusCode
}

// oneByteReader reads one byte at a time, so that a bufio.Reader over it reads nothing past
// what its user asked for.
type oneByteReader struct{ c net.Conn }

func (r oneByteReader) Read(p []byte) (int, error) { return r.c.Read(p[:min(len(p), 1)]) }

// TestEgressAllowedPastCapCountedPerTarget (issue #21, review 9's F3): past the launch's row cap
// (audit.maxRowsPerLaunch) the tunnels a box opens to allowed hosts are no longer written one
// each, but the final summary, written when the launch ends, counts them per target; and the
// summary of the refusals names the refused hosts with their counts. Before, a summary row had
// a count and no target at all, and the test fails.
func TestEgressAllowedPastCapCountedPerTarget(t *testing.T) {
	t.Parallel()
	const limit, refused = 100, 150
	r := newAuditRigConfig(t, "audit:\n  maxRowsPerLaunch: 100\n")
	var ups []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("hello"))
				c.Close()
			}
		}()
		ups = append(ups, ln.Addr().String())
	}
	const id = "egress-cap-targets"
	sock := filepath.Join(startAuditEgress(t, r, id, ups...), egressSocket)
	auth := egressAuth(t, r, id)
	for i := range refused {
		c, status := egressConnect(t, sock, auth, fmt.Sprintf("h%d.evil.test:443", i%2))
		c.Close()
		if status != http.StatusForbidden {
			t.Fatalf("refused CONNECT answered %d", status)
		}
	}
	// Past the cap: three tunnels to the first upstream, one to the second, each carrying bytes.
	for _, up := range []string{ups[0], ups[0], ups[1], ups[0]} {
		c, status := egressConnect(t, sock, auth, up)
		if status != http.StatusOK {
			t.Fatalf("CONNECT %s answered %d, want 200", up, status)
		}
		if b, err := io.ReadAll(c); err != nil || string(b) != "hello" {
			t.Fatalf("through the tunnel to %s: %q, %v", up, b, err)
		}
		c.Close()
	}
	waitFor(t, "the proxy's count of the tunnels", func() bool { return r.egress.launchStats(id).Allowed == 4 })
	r.egress.End(id) // the launch ends: the final summaries
	r.d.audits.Close()

	rows := egressRows(t, r.st, id)
	if len(rows) > limit+2 {
		t.Errorf("%d egress rows with a cap of %d, want at most the cap and a summary per decision", len(rows), limit)
	}
	sums := map[string]egressAuditDetail{}
	for _, d := range rows {
		if d.Count > 0 {
			sums[d.Decision] = d
		}
		if d.Count == 0 && d.Decision == egress.DecisionAllow {
			t.Errorf("a tunnel past the cap was written one by one: %+v", d)
		}
	}
	allow := sums[egress.DecisionAllow]
	got := map[string]int64{}
	for _, c := range allow.Targets {
		got[c.Name] = c.Count
	}
	if allow.Count != 4 || len(got) != 2 || got[ups[0]] != 3 || got[ups[1]] != 1 || allow.BytesDown != 4*5 {
		t.Errorf("final summary of the tunnels past the cap: %+v, want 4 counted as %s×3 and %s×1 with 20 bytes down", allow, ups[0], ups[1])
	}
	ref := sums[egress.DecisionRefuse]
	var n int64
	for _, c := range ref.Targets {
		if c.Name != "h0.evil.test:443" && c.Name != "h1.evil.test:443" {
			t.Errorf("refusal summary names %q, not a refused host", c.Name)
		}
		n += c.Count
	}
	if ref.Count == 0 || len(ref.Targets) != 2 || n+ref.OtherTargets != ref.Count {
		t.Errorf("refusal summary %+v, want the 2 refused hosts counting every refusal held back", ref)
	}
}

// TestEgressFloodDaemonStop: the daemon stops while a launch's proxy holds back the records of
// a flood (the box keeps running, its proxy is not closed): the daemon's stop writes their
// summary before it commits the audit rows, so the totals the next daemon rebuilds count every
// request. With flushHeldRecords a no-op the totals are short and the test fails.
func TestEgressFloodDaemonStop(t *testing.T) {
	t.Parallel()
	const flood, id = 1000, "egress-flood-stop"
	r := newAuditRig(t)
	floodEgress(t, r, id, flood)
	if _, err := os.Stat(filepath.Join(r.root, "state", heldDir, id+"."+heldEgress)); err != nil {
		t.Errorf("no journal of the records held back during the flood: %v", err)
	}
	// The daemon's stop, as serve runs it: the brokers' held records, then the audit writer.
	r.d.stopBrokers()
	tot, err := r.st.EgressTotals(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := tot[id].Refused; got != flood {
		t.Errorf("refused total after the daemon's stop = %d, want %d", got, flood)
	}
	// Written and committed, the held records' journal is gone: the next daemon has nothing
	// to write again.
	if left, _ := filepath.Glob(filepath.Join(r.root, "state", heldDir, "*")); len(left) != 0 {
		t.Errorf("journals left after the daemon's stop: %v", left)
	}
	r.egress.End(id)
}
