package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
)

// egressRefusals is a bash script fragment that sends the box's egress proxy n CONNECTs the
// allowlist refuses, to three hosts in turn (h0, h1 and h2.evil.test:443), with bash's /dev/tcp
// (no process per request) and the launch's pairing from its proxy variable, as any program in
// the box can, and exits 1 at the first that is not refused. It defines connect HOST:PORT.
func egressRefusals(n int) string {
	return fmt.Sprintf(`p=${HTTPS_PROXY#http://agentbox:}; p=${p%%@*}; port=${HTTPS_PROXY##*:}
connect() {
  exec 3<>/dev/tcp/127.0.0.1/$port
  printf 'CONNECT %%s HTTP/1.1\r\nHost: %%s\r\nProxy-Authorization: Bearer %%s\r\n\r\n' "$1" "$1" "$p" >&3
  IFS= read -r status <&3
  while IFS= read -r l <&3 && [ "${l%%$'\r'}" != "" ]; do :; done
}
for i in $(seq %d); do
  connect "h$((i %% 3)).evil.test:443"
  exec 3<&-
  case $status in *" 403 "*) ;; *) echo "refused CONNECT $i answered: $status"; exit 1;; esac
done
`, n)
}

// egressFloodScript is a box script that sends its egress proxy n refused CONNECTs
// (egressRefusals), then one CONNECT to allowed (host:port) and a GET through that tunnel.
func egressFloodScript(n int, allowed string) string {
	return "set -e\n" + egressRefusals(n) + fmt.Sprintf(`connect %s
echo "allowed CONNECT: $status"
printf 'GET /after-the-flood HTTP/1.0\r\nHost: %s\r\n\r\n' >&3
IFS= read -r status <&3
echo "through the tunnel: $status"
exec 3<&-
`, allowed, allowed)
}

// TestEgressAllowedRecordedAfterFlood guards review 9's F3 end to end: a box spends its
// launch's record budget with refused CONNECTs (more than recordlimit.Burst) and then opens a
// tunnel to an allowed host; the tunnel has a log line and an audit row of its own, naming its
// target, not only a count in a summary. Without Limiter.AdmitAllowed (egress.Proxy.emit
// calling Admit for every decision) it has neither and the test fails (checked). The summary
// of the refusals held back names the refused hosts with their counts (issue #21: before, a
// summary named no target). One box; about 3 s.
func TestEgressAllowedRecordedAfterFlood(t *testing.T) {
	const flood = 600 // > recordlimit.Burst (512): the budget's rate is spent
	var reached atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Write([]byte("ok"))
	}))
	t.Cleanup(up.Close)
	target := strings.TrimPrefix(up.URL, "http://")
	e := NewEnv(t)
	writeConfig(t, e, "egressAllow: [\""+target+"\"]\n")

	r := e.Run("", "run", "bash", "--", "-c", egressFloodScript(flood, target))
	t.Logf("box: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	if r.Code != 0 || !strings.Contains(r.Stdout, "allowed CONNECT: HTTP/1.1 200") || !strings.Contains(r.Stdout, "through the tunnel: HTTP/1.0 200") {
		t.Fatalf("the flood and the allowed tunnel did not run as planned (exit %d)", r.Code)
	}
	if reached.Load() != 1 {
		t.Fatalf("the upstream was reached %d times through the tunnel, want 1", reached.Load())
	}
	var id string
	for _, l := range e.Launches() {
		id = l.ID
	}

	st, err := store.Open(filepath.Join(e.State, "agentbox", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var allowRow, summary *brokerRow
	var refusedRows int64
	// The rows are written when each tunnel ends and, for the summary, when the launch's proxy
	// closes; held back, the allowed tunnel would have no row of its own at all.
	eventually(t, "a row of its own for the allowed CONNECT, and every refusal counted", func() bool {
		allowRow, summary, refusedRows = nil, nil, 0
		for _, x := range brokerRows(t, st, id) {
			if x.Kind != "egress" {
				continue
			}
			switch {
			case x.Decision == "allow" && x.Count == 0 && x.Target == target:
				allowRow = &x
			case x.Decision == "refuse" && x.Count > 0:
				summary = &x
				refusedRows += x.Count
			case x.Decision == "refuse":
				refusedRows++
			}
		}
		return refusedRows == flood && allowRow != nil
	})
	if summary == nil {
		t.Fatal("no summary row of the refusals held back")
	}
	logs, err := os.ReadFile(filepath.Join(e.State, "agentbox", "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	var allowLine bool
	for _, l := range strings.Split(string(logs), "\n") {
		if strings.Contains(l, "CONNECT "+target+" ") && strings.Contains(l, "decision=allow") && !strings.Contains(l, "count=") {
			allowLine = true
		}
	}
	if !allowLine {
		t.Errorf("no log line of its own for the allowed CONNECT %s after the flood", target)
	}
	t.Logf("summary of %d refusals: targets %+v, others %d", summary.Count, summary.Targets, summary.OtherTargets)
	sum := summary.OtherTargets
	for _, c := range summary.Targets {
		if !strings.HasSuffix(c.Name, ".evil.test:443") || c.Count <= 0 {
			t.Errorf("summary target %+v, want one of the refused hosts with its count", c)
		}
		sum += c.Count
	}
	if len(summary.Targets) != 3 || sum != summary.Count {
		t.Errorf("summary names %d targets counting %d of %d refusals, want the 3 refused hosts counting all", len(summary.Targets), sum, summary.Count)
	}
}
