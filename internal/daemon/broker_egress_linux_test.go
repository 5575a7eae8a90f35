package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/egress/egresstest"
	"github.com/agentbox/agentbox/internal/store"
)

// TestEgressProxyInBox runs real curl, git, npm and pip inside a real box launched by the
// daemon with egressAllow configured, against an outside server (its own network namespace
// as root, host loopback otherwise): allowed hosts work through the proxy with the box's
// proxy environment; a refused host is reported in the launch's egress counters with its
// name; nothing leaves the box another way.
func TestEgressProxyInBox(t *testing.T) {
	out := egresstest.Start(t)
	old := egressResolver
	egressResolver = egress.Hosts(out.Hosts())
	t.Cleanup(func() { egressResolver = old })

	td := startDaemon(t, nil)
	if !out.Netns {
		t.Log("no network namespace (not root): the outside is on host loopback, allowed by explicit 127.0.0.1 entries")
	}
	var cfg strings.Builder
	cfg.WriteString("egress: deny\negressAllow:\n")
	for _, e := range out.Allow() {
		fmt.Fprintf(&cfg, "  - %q\n", e)
	}
	if err := os.MkdirAll(filepath.Dir(td.config), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(td.config, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(out.CAFile)
	if err := os.WriteFile(filepath.Join(td.work, "ca.pem"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(td.work, 0o755); err != nil {
		t.Fatal(err)
	}
	has := func(tool string) bool { _, err := exec.LookPath(tool); return err == nil }
	var script strings.Builder
	script.WriteString(`exec >out.txt 2>&1
echo "== env"; env | grep -i '_proxy=' | sort | sed 's/abp_[A-Za-z0-9_-]*/PAIRING/'
echo "== curl"; curl -sS --fail --cacert ca.pem ` + out.URL("/hello") + `; echo "curl=$?"
echo "== refused"; curl -sS --fail https://evil.outside.test/; echo "refused=$?"
echo "== bypass"; curl -sS --noproxy '*' --max-time 5 --cacert ca.pem ` + out.URL("/hello") + `; echo "bypass=$?"
`)
	if has("git") && out.RepoURL != "" {
		script.WriteString(`echo "== git"; GIT_SSL_CAINFO=$PWD/ca.pem git clone -q ` + out.RepoURL + ` clone && cat clone/README; echo "git=$?"
`)
	}
	if has("npm") {
		script.WriteString(`echo "== npm"; mkdir proj && cd proj && echo '{"name":"p","version":"0.0.0","private":true}' > package.json &&
npm install --no-audit --no-fund --no-update-notifier --registry ` + out.URL("/") + ` --cafile ../ca.pem --cache ../.npm ` + egresstest.NPMPackage + ` && cat node_modules/` + egresstest.NPMPackage + `/index.js; echo "npm=$?"; cd ..
`)
	}
	pip := ""
	if p, err := exec.LookPath("pip3"); err == nil && strings.HasPrefix(p, "/usr/") {
		pip = p // a pip under the user's home (pyenv) is not in the box: its home is empty
	}
	if pip != "" {
		script.WriteString(`echo "== pip"; ` + pip + ` download --no-deps --no-cache-dir --disable-pip-version-check --index-url ` + out.URL("/simple/") +
			` --cert ca.pem -d wheels ` + egresstest.PipPackage + ` && ls wheels; echo "pip=$?"
`)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp, err := td.c.Launch(ctx, &api.LaunchRequest{Program: "sh", Path: sh, Args: []string{"-c", script.String()}, Workspace: td.work, Detach: true})
	if err != nil {
		t.Fatal(err)
	}
	var l *api.Launch
	waitFor(t, "the box to exit", func() bool {
		l, err = td.c.Get(ctx, resp.ID)
		return err == nil && l.State != api.StateRunning && l.State != api.StateStarting
	})
	outB, _ := os.ReadFile(filepath.Join(td.work, "out.txt"))
	o := string(outB)
	if l.State != api.StateExited || l.ExitCode == nil || *l.ExitCode != 0 {
		t.Fatalf("box ended %s (exit %v):\n%s", l.State, l.ExitCode, o)
	}
	want := []string{
		"HTTPS_PROXY=http://agentbox:PAIRING@127.0.0.1:3128", "https_proxy=http://agentbox:PAIRING@127.0.0.1:3128",
		"NO_PROXY=127.0.0.1,localhost,::1", "ALL_PROXY=http://agentbox:PAIRING@127.0.0.1:3128",
		"hello from the outside", "curl=0", "CONNECT tunnel failed, response 403",
	}
	if has("git") && out.RepoURL != "" {
		want = append(want, "cloned through the egress proxy", "git=0")
	}
	if has("npm") {
		want = append(want, "egress ok", "npm=0")
	}
	if pip != "" {
		want = append(want, "agentbox_egress_demo-1.0.0-py3-none-any.whl", "pip=0")
	} else {
		t.Log("pip: no system pip (/usr/…/pip3) to run in the box; skipped")
	}
	for _, w := range want {
		if !strings.Contains(o, w) {
			t.Errorf("box output lacks %q:\n%s", w, o)
		}
	}
	for _, bad := range []string{"refused=0", "bypass=0"} {
		if strings.Contains(o, bad) {
			t.Errorf("box output has %q:\n%s", bad, o)
		}
	}

	// The launch shows its counters and the refused host.
	ls, err := td.c.Launches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got *api.EgressStats
	for _, x := range ls {
		if x.ID == resp.ID {
			got = x.Egress
		}
	}
	if got == nil || got.Allowed < 2 || got.Refused < 1 || got.LastRefused != "evil.outside.test:443" || got.LastRefusedReason != egress.ReasonHostNotAllowed {
		t.Errorf("launch egress stats = %+v", got)
	}
	b, _ := json.Marshal(got)
	t.Logf("launches --json egress: %s", b)
	// One audit row per tunnel.
	rows := egressAuditRows(t, td, resp.ID)
	if int64(len(rows)) != got.Allowed+got.Refused+got.Failed {
		t.Errorf("%d audit rows for %d+%d+%d tunnels", len(rows), got.Allowed, got.Refused, got.Failed)
	}
}

func egressAuditRows(t *testing.T, td *testDaemon, id string) []store.Audit {
	t.Helper()
	st, err := store.Open(filepath.Join(filepath.Dir(td.runtime), "state", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var rows []store.Audit
	waitFor(t, "the audit rows", func() bool {
		all, err := st.ListAudit(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		rows = rows[:0]
		for _, a := range all {
			if a.Kind == auditKindEgress {
				rows = append(rows, a)
			}
		}
		return len(rows) > 0
	})
	return rows
}
