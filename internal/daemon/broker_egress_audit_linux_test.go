package daemon

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/relay/session"
	"github.com/agentbox/agentbox/internal/store"
)

// auditRig is a daemon's store with its relay and egress brokers, as serve sets them up before
// it listens, without the rest of the daemon (no engine, no boxes).
type auditRig struct {
	d      *Daemon
	relay  *relayBroker
	egress *egressBroker
	st     *store.Store
	dbPath string
	root   string
	run    string // its runtime directory
}

func newAuditRig(t *testing.T) *auditRig { return newAuditRigConfig(t, "") }

// newAuditRigConfig is newAuditRig with a user configuration file holding userConfig ("" for
// none).
func newAuditRigConfig(t testing.TB, userConfig string) *auditRig {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "abaudit")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	for _, n := range []string{"state", "config", "config/agentbox"} {
		if err := os.Mkdir(filepath.Join(root, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if userConfig != "" {
		if err := os.WriteFile(filepath.Join(root, "config", "agentbox", "config.yaml"), []byte(userConfig), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return filepath.Join(root, "config")
		}
		return ""
	}
	run := runtimeDirFor(t, root)
	d, err := newDaemon(Options{RuntimeDir: run, StateDir: filepath.Join(root, "state"),
		Config: config.LoadOptions{Getenv: getenv, PolicyFile: filepath.Join(root, "no-policy.yaml")}, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	r := &auditRig{d: d, root: root, run: run, dbPath: filepath.Join(root, "state", "agentbox.db")}
	if r.st, err = store.Open(r.dbPath); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.store, d.db, d.ctx = r.st, r.st, ctx
	if err := d.startBrokers(); err != nil {
		t.Fatal(err)
	}
	r.relay, r.egress = d.relay, d.egress
	t.Cleanup(func() {
		d.audits.Close()
		cancel()
		r.st.Close()
	})
	return r
}

// egressRows returns the egress audit rows of a launch in st.
func egressRows(t *testing.T, st *store.Store, id string) []egressAuditDetail {
	t.Helper()
	all, err := st.ListAudit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []egressAuditDetail
	for _, a := range all {
		if a.Kind != auditKindEgress {
			continue
		}
		var d egressAuditDetail
		if err := json.Unmarshal(a.Detail, &d); err != nil {
			t.Fatalf("egress audit row %d: %v: %s", a.Seq, err, a.Detail)
		}
		out = append(out, d)
	}
	return out
}

// TestEgressAuditBatched: a tunnel of a launch's egress proxy leaves its audit row in the
// store through the daemon's batched audit writer while the daemon runs: the batch is
// committed after its interval, with no flush and no shutdown. The store is read through a
// connection of its own, as another process would read it.
func TestEgressAuditBatched(t *testing.T) {
	t.Parallel()
	r := newAuditRig(t)
	const id = "egress-audit-batched"
	runDir := startAuditEgress(t, r, id)
	t.Cleanup(func() { r.egress.End(id) })
	_, pairing, err := r.d.sessions.Create(context.Background(), session.Spec{Kind: session.KindLaunch, ClientID: "generic", LaunchID: id})
	if err != nil {
		t.Fatal(err)
	}

	// A tunnel the allowlist refuses, asked with the launch's pairing, as curl in the box would.
	c, err := net.Dial("unix", filepath.Join(runDir, egressSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("agentbox:" + pairing.Reveal()))
	fmt.Fprintf(c, "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\nProxy-Authorization: Basic %s\r\n\r\n", auth)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT evil.test:443: %s, want 403 (refused by the allowlist)", resp.Status)
	}

	other, err := store.Open(r.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var rows []egressAuditDetail
	waitFor(t, "the egress audit row in the store", func() bool {
		rows = egressRows(t, other, id)
		return len(rows) > 0
	})
	if len(rows) != 1 {
		t.Fatalf("%d egress audit rows for one tunnel: %+v", len(rows), rows)
	}
	if got := rows[0]; got.Method != http.MethodConnect || got.Target != "evil.test:443" || got.Decision != egress.DecisionRefuse ||
		got.Reason != egress.ReasonHostNotAllowed || got.Status != http.StatusForbidden || got.Session == "" {
		t.Errorf("egress audit row = %+v, want CONNECT evil.test:443 refused (host_not_allowed, 403) with the launch's session", got)
	}
}

// TestEgressAuditShutdown: every egress audit row queued when the daemon shuts down is in the
// store once the shutdown's flush (stopBrokers, which serve runs before it closes the store)
// has returned, in the order queued, and is still there when the store is opened again.
func TestEgressAuditShutdown(t *testing.T) {
	t.Parallel()
	r := newAuditRig(t)
	const id, n = "egress-audit-shutdown", 200
	start := time.Now()
	for i := range n {
		r.egress.audit(id, egress.Record{Time: start.Add(time.Duration(i)), Method: http.MethodConnect,
			Target: fmt.Sprintf("host%d.test:443", i), Host: fmt.Sprintf("host%d.test", i), Port: 443,
			Decision: egress.DecisionRefuse, Reason: egress.ReasonHostNotAllowed, Code: api.CodeEgressRefused, Status: http.StatusForbidden})
	}
	r.d.audits.Close()
	if err := r.st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(r.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows := egressRows(t, st, id)
	if len(rows) != n {
		t.Fatalf("%d of %d egress audit rows in the store after the shutdown flush", len(rows), n)
	}
	for i, got := range rows {
		if want := fmt.Sprintf("host%d.test:443", i); got.Target != want || got.Decision != egress.DecisionRefuse {
			t.Fatalf("row %d: %+v, want a refusal of %s (rows out of order or altered)", i, got, want)
		}
	}
}

// startAuditEgress starts launch id's egress proxy on the rig, allowing the entries of allow
// (allowed.test:443 when there are none), and returns its run directory.
func startAuditEgress(t *testing.T, r *auditRig, id string, allowEntries ...string) string {
	t.Helper()
	runDir := filepath.Join(launchdir.Dir(r.run, id), launchdir.RunDir)
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if len(allowEntries) == 0 {
		allowEntries = []string{"allowed.test:443"}
	}
	allow, err := egress.ParseAllowlist(allowEntries)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.egress.start(id, runDir, allow, api.EgressStats{}, nil); err != nil {
		t.Fatal(err)
	}
	return runDir
}
