package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/recordlimit"
	"github.com/agentbox/agentbox/internal/relay/session"
	"github.com/agentbox/agentbox/internal/store"
)

// auditRow is what the flood tests read of an audit row of any kind.
type auditRow struct {
	Kind         string
	Count        int64                   `json:"count"`
	Reason       string                  `json:"reason"`
	Targets      []recordlimit.NameCount `json:"targets"`
	OtherTargets int64                   `json:"otherTargets"`
}

// launchRows returns every audit row of launch id in st, and also those of no launch.
func launchRows(t *testing.T, st *store.Store, id string) []auditRow {
	t.Helper()
	all, err := st.ListAudit(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []auditRow
	for _, a := range all {
		if a.LaunchID != id && a.LaunchID != "" {
			continue
		}
		var r auditRow
		if err := json.Unmarshal(a.Detail, &r); err != nil {
			t.Fatalf("audit row %d: %v: %s", a.Seq, err, a.Detail)
		}
		r.Kind = a.Kind
		out = append(out, r)
	}
	return out
}

// floodRelay prepares launch id's relay channel in r (egress deny: the launch's own socket) and
// sends it n requests for path with the launch's pairing, one after another on one kept-alive
// connection, as a program in the box would; every answer must have status want.
func floodRelay(t testing.TB, r *auditRig, id, path string, n, want int) {
	t.Helper()
	l := &broker.Launch{ID: id, RunDir: filepath.Join(r.root, "run", "launches", id, "run"), Profile: "generic",
		Egress: plan.EgressDeny, Config: config.Defaults()}
	if err := os.MkdirAll(l.RunDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var c plan.Contributions
	if err := r.relay.Prepare(context.Background(), l, &c); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(l.RunDir, relaySocket)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	pairing := envOf(&c, EnvPairing)
	for i := range n {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:7080"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+pairing)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d for %s: %s, want %d", i, path, resp.Status, want)
		}
	}
}

// TestRelayFloodBounded (issue #21, item 10): a box that floods its relay channel, with its own
// pairing, over the launch's real socket, into a real store on disk, adds a bounded number of
// log lines and audit rows: the LLM relay's requests (the relay's rows), and refused git
// requests (a relay row and a git row each), all drawing on the launch's one record budget
// (internal/recordlimit). Past the budget the requests are counted, not written, into summary
// rows, so the relay totals a restarted daemon rebuilds from the store count every request.
// Without the limit the store gets a row (two for git) and the log a line per request, and
// the test fails.
func TestRelayFloodBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path string
		n, status  int
		kinds      []string // the kinds of row one request writes
		// targets are what a summary row of each kind names (issue #21: a summary named none).
		targets map[string]string
	}{
		// No gateway credential is configured: the LLM relay answers each request itself (a
		// GET of the model list, which it forwards once it has one).
		{"LLM", "/sandbox/anthropic/v1/models", 3000, http.StatusUnauthorized, []string{"relay"},
			map[string]string{"relay": "/sandbox/anthropic/v1/models"}},
		// git.allow is empty: the git relay refuses every remote (git's own ERR advertisement).
		{"Git", "/git/evil.example/victim.git/info/refs?service=git-upload-pack", 5000, http.StatusOK, []string{"relay", "git"},
			map[string]string{"relay": "/git/evil.example/victim.git/info/refs", "git": "evil.example/victim.git"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newAuditRig(t)
			var logw countWriter
			r.d.log = slog.New(slog.NewTextHandler(&logw, nil))
			r.relay.Log = r.d.log
			id := "relay-flood-" + tc.name
			storeBefore := storeBytes(t, r.dbPath)
			start := time.Now()
			floodRelay(t, r, id, tc.path, tc.n, tc.status)
			elapsed := time.Since(start)
			r.d.endBrokers(id) // the launch ends: the summaries of what was held back are written
			r.d.audits.Close()
			if err := r.st.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d requests in %v: store +%d bytes, log +%d bytes, %d lines", tc.n, elapsed.Round(time.Millisecond),
				storeBytes(t, r.dbPath)-storeBefore, logw.bytes.Load(), logw.lines.Load())
			st, err := store.Open(r.dbPath)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			r.st = st

			allowed := floodBound(elapsed, int64(len(tc.kinds)))
			rows := launchRows(t, st, id)
			if int64(len(rows)) > allowed {
				t.Errorf("%d audit rows for %d requests, want at most %d (the launch's record budget)", len(rows), tc.n, allowed)
			}
			if lines := logw.lines.Load(); lines > allowed+2 {
				t.Errorf("%d log lines for %d requests, want at most %d", lines, tc.n, allowed+2)
			}
			for _, kind := range tc.kinds {
				var requests, summaries int64
				for _, row := range rows {
					if row.Kind != kind {
						continue
					}
					if row.Count > 0 {
						summaries++
						requests += row.Count
						if row.Reason != "rate_limited" && kind == "relay" {
							t.Errorf("summary row %+v, want reason rate_limited", row)
						}
						if want := tc.targets[kind]; len(row.Targets) != 1 || row.Targets[0].Name != want ||
							row.Targets[0].Count != row.Count || row.OtherTargets != 0 {
							t.Errorf("%s summary row names %+v (others %d), want %s counting all %d requests", kind, row.Targets, row.OtherTargets, want, row.Count)
						}
					} else {
						requests++
					}
				}
				if summaries == 0 {
					t.Errorf("no %s summary row counts the requests held back", kind)
				}
				if requests != int64(tc.n) {
					t.Errorf("%s rows account for %d requests, want %d (every request counted)", kind, requests, tc.n)
				}
			}
			tot, err := st.RelayTotals(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if got := tot[id].Requests; got != tc.n {
				t.Errorf("relay totals rebuilt from the store: %d requests, want %d", got, tc.n)
			}
		})
	}
}

// TestAuditRowsPerLaunchCap (issue #21, item 10): audit.maxRowsPerLaunch bounds a launch's rows
// in all, however long its flood lasts, not only their rate: with a cap of 100, 600 refused
// requests leave at most 100 rows and, when the launch ends, one summary per kind of row.
func TestAuditRowsPerLaunchCap(t *testing.T) {
	t.Parallel()
	const n, limit = 600, 100
	r := newAuditRigConfig(t, "audit:\n  maxRowsPerLaunch: 100\n")
	const id = "relay-cap"
	floodRelay(t, r, id, "/sandbox/anthropic/v1/models", n, http.StatusUnauthorized)
	r.d.endBrokers(id)
	r.d.audits.Close()
	rows := launchRows(t, r.st, id)
	if len(rows) > limit+1 {
		t.Errorf("%d audit rows with audit.maxRowsPerLaunch %d, want at most %d", len(rows), limit, limit+1)
	}
	var requests int64
	for _, row := range rows {
		requests += max(row.Count, 1)
	}
	if requests != n {
		t.Errorf("rows account for %d requests, want %d", requests, n)
	}
}

// BenchmarkRelayFlood measures a box flooding its relay channel with refused git requests (a
// relay row and a git row each): the time per request, and the store's and the log's growth
// per request, with the launch's record budget (docs/benchmarks.md has the figures before it).
// Run it with a fixed count: -benchtime=5000x.
func BenchmarkRelayFlood(b *testing.B) {
	r := newAuditRigConfig(b, "")
	var logw countWriter
	r.d.log = slog.New(slog.NewTextHandler(&logw, nil))
	r.relay.Log = r.d.log
	before := storeBytes(b, r.dbPath)
	b.ResetTimer()
	floodRelay(b, r, "bench", "/git/evil.example/victim.git/info/refs?service=git-upload-pack", b.N, http.StatusOK)
	b.StopTimer()
	r.d.endBrokers("bench")
	r.d.audits.Close()
	if err := r.st.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(storeBytes(b, r.dbPath)-before)/float64(b.N), "store-B/req")
	b.ReportMetric(float64(logw.bytes.Load())/float64(b.N), "log-B/req")
	st, err := store.Open(r.dbPath)
	if err != nil {
		b.Fatal(err)
	}
	r.st = st
}

// TestAttackUnpairedFloodSparesManualSessions (issue #21): the relay's shared loopback listener
// takes TCP connections from any local user, who can send it requests with pairings that are
// refused. Those records drew on the budget of the sessions made by hand, so 150 of them, under
// a cap of 100 rows, left a real session's requests afterwards counted, not written: the flood
// cost the session its records. Now the refused pairings have a budget of their own: the
// session's requests are written one each while the flood stays bounded. Without the separate
// budget no row of the session's own is written and the test fails.
func TestAttackUnpairedFloodSparesManualSessions(t *testing.T) {
	t.Parallel()
	const limit, flood, real = 100, 150, 3
	r := newAuditRigConfig(t, "audit:\n  maxRowsPerLaunch: 100\n")
	addr, err := r.relay.sharedListener(config.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	sess, pairing, err := r.d.sessions.Create(context.Background(), session.Spec{Kind: session.KindManual, ClientID: "my-script"})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	send := func(bearer string, want int) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/sandbox/anthropic/v1/models", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request with pairing %.8s…: %s, want %d", bearer, resp.Status, want)
		}
	}
	// Another local user's flood: pairings that are not live.
	for i := range flood {
		send(fmt.Sprintf("not-a-pairing-%d", i), http.StatusForbidden)
	}
	// The session made by hand: no gateway is configured, so the relay answers 401 itself.
	for range real {
		send(pairing.Reveal(), http.StatusUnauthorized)
	}
	// rows counts the session's rows of its own (not summaries) and the rows of refused
	// pairings in the store.
	rows := func() (own, unpaired int) {
		all, err := r.st.ListAudit(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range all {
			var d struct {
				Session string `json:"session"`
				Count   int64  `json:"count"`
			}
			if err := json.Unmarshal(a.Detail, &d); err != nil {
				t.Fatal(err)
			}
			switch {
			case a.Kind == "relay" && d.Session == sess.ID() && d.Count == 0:
				own++
			case a.Kind == "relay" && d.Session == "":
				unpaired++
			}
		}
		return own, unpaired
	}
	// Held back, the session's records would reach the store only as a summary (Count set).
	waitFor(t, "the session's requests written one each after the flood", func() bool {
		own, _ := rows()
		return own == real
	})
	_, unpaired := rows()
	if unpaired > limit {
		t.Errorf("%d rows of refused pairings with a cap of %d: the flood is not bounded", unpaired, limit)
	}
}
