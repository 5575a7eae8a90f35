package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
	// Not parallel: its box runs git, npm and pip under waitFor's one-minute deadline, which
	// the flood tests beside it pushed past at load 43.
	out := egresstest.Start(t)
	td := startDaemonOpts(t, Options{brokers: brokerHooks{egressResolver: egress.Hosts(out.Hosts())}})
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
	// A pip under the user's home (pyenv) is not in the box, whose home is empty: the system's.
	pip := ""
	for _, p := range []string{"/usr/bin/pip3", "/usr/local/bin/pip3"} {
		if _, err := os.Stat(p); err == nil {
			pip = p
			break
		}
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
	l := td.runToEnd(t, &api.LaunchRequest{Program: "sh", Path: sh, Args: []string{"-c", script.String()}, Workspace: td.work})
	outB, _ := os.ReadFile(filepath.Join(td.work, "out.txt"))
	o := string(outB)
	if l.State != api.StateExited || l.ExitCode == nil || *l.ExitCode != 0 {
		t.Fatalf("box ended %s (exit %v):\n%s", l.State, l.ExitCode, o)
	}
	want := []string{
		"HTTPS_PROXY=http://agentbox:PAIRING@127.0.0.1:3128", "https_proxy=http://agentbox:PAIRING@127.0.0.1:3128",
		"NO_PROXY=127.0.0.1,localhost,::1", "ALL_PROXY=http://agentbox:PAIRING@127.0.0.1:3128",
		"hello from the outside", "curl=0", "403",
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
		if x.ID == l.ID {
			got = x.Egress
		}
	}
	if got == nil || got.Allowed < 2 || got.Refused < 1 || got.LastRefused != "evil.outside.test:443" || got.LastRefusedReason != egress.ReasonHostNotAllowed {
		t.Errorf("launch egress stats = %+v", got)
	}
	if got == nil {
		t.Fatal("no egress record")
	}
	b, _ := json.Marshal(got)
	t.Logf("launches --json egress: %s", b)
	// One audit row per tunnel.
	rows := egressAuditRows(t, td, l.ID, int(got.Allowed+got.Refused+got.Failed))
	if int64(len(rows)) != got.Allowed+got.Refused+got.Failed {
		t.Errorf("%d audit rows for %d+%d+%d tunnels", len(rows), got.Allowed, got.Refused, got.Failed)
	}
}

// egressAuditRows returns launch id's egress audit rows once there are want of them, or those
// there are after a minute (a hang guard): the rows are written after the requests are answered,
// so the launch may end before the last is committed (the test read 1 of 2 rows in a CI run when
// it waited for the first row only).
func egressAuditRows(t *testing.T, td *testDaemon, id string, want int) []store.Audit {
	t.Helper()
	st, err := store.Open(filepath.Join(td.root, "state", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var rows []store.Audit
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
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
		if len(rows) >= want || time.Now().After(deadline) {
			return rows
		}
	}
}

// TestEgressProxyCLI drives the proxy through the agentbox binary as a user would: the user
// config at $XDG_CONFIG_HOME/agentbox/config.yaml names the outside server by address (the
// daemon resolves names with the host's resolver, which knows no test names), `agentbox run
// --wait` runs curl in a box, `agentbox revoke` cuts a download in flight, and `agentbox
// launches --json` shows the counters and the refused host.
func TestEgressProxyCLI(t *testing.T) {
	t.Parallel()
	out := egresstest.Start(t)
	bin, _ := agentboxBinaries(t)
	root, err := os.MkdirTemp("/tmp", "abe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	dirs := map[string]string{}
	for _, n := range []string{"state", "config", "work"} {
		dirs[n] = filepath.Join(root, n)
		if err := os.MkdirAll(dirs[n], 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dirs["run"] = runtimeDirFor(t, root)
	os.Chmod(dirs["work"], 0o755)
	ca, _ := os.ReadFile(out.CAFile)
	os.WriteFile(filepath.Join(dirs["work"], "ca.pem"), ca, 0o644)
	cfgFile := filepath.Join(dirs["config"], "agentbox", "config.yaml")
	os.MkdirAll(filepath.Dir(cfgFile), 0o700)
	if err := os.WriteFile(cfgFile, []byte("egressAllow:\n  - "+strconvQuote(out.AddrAllow())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "XDG_RUNTIME_DIR="+dirs["run"], "XDG_STATE_HOME="+dirs["state"], "XDG_CONFIG_HOME="+dirs["config"])
	abx := func(args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dirs["work"], env
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	t.Cleanup(func() {
		if o, err := abx("daemon", "stop"); err != nil {
			t.Logf("daemon stop: %v: %s", err, o)
		}
	})
	// --noproxy '': a loopback outside (not root) is at 127.0.0.1, which NO_PROXY keeps for the
	// in-box relay; from the box such a direct connection reaches nothing.
	sh, _ := exec.LookPath("sh")
	o, err := abx("run", "--wait", sh, "--", "-c",
		`curl -sS --fail --noproxy '' --cacert ca.pem `+out.AddrURL("/hello")+` && curl -sS --fail https://evil.outside.test/; echo "refused=$?"`)
	if err != nil || !strings.Contains(o, "hello from the outside") || !strings.Contains(o, "refused=") || strings.Contains(o, "refused=0") {
		t.Fatalf("agentbox run: %v:\n%s", err, o)
	}

	// A download in flight is cut by revocation.
	o, err = abx("run", "--detach", sh, "--", "-c",
		`curl -sS -N --noproxy '' --cacert ca.pem `+out.AddrURL("/slow")+` > slow.txt 2>slow.err; echo "slow=$?" > slow.done; sleep 1`)
	if err != nil {
		t.Fatalf("agentbox run --detach: %v:\n%s", err, o)
	}
	id := strings.TrimSpace(o)
	waitFor(t, "the download to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(dirs["work"], "slow.txt"))
		return strings.Contains(string(b), "chunk 2")
	})
	if o, err := abx("revoke", id); err != nil {
		t.Fatalf("agentbox revoke: %v:\n%s", err, o)
	}
	var done string
	waitFor(t, "curl to see the tunnel closed", func() bool {
		b, _ := os.ReadFile(filepath.Join(dirs["work"], "slow.done"))
		done = string(b)
		return done != ""
	})
	if strings.Contains(done, "slow=0") {
		t.Errorf("the download survived revocation: %s", done)
	}
	slow, _ := os.ReadFile(filepath.Join(dirs["work"], "slow.txt"))
	if strings.Contains(string(slow), "chunk 599") {
		t.Errorf("the download ran to its end")
	}

	// The proxy counts a tunnel once its record is written, after the tunnel closed: curl can
	// see the close before (CI, the ordinary user's pass: every counter 0). So the launches are
	// read again until the revoked one's tunnel is counted, for 10 s at most.
	var first, second *api.EgressStats
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		o, err = abx("launches", "--json")
		if err != nil {
			t.Fatalf("agentbox launches --json: %v:\n%s", err, o)
		}
		var ls []api.Launch
		if err := json.Unmarshal([]byte(o), &ls); err != nil {
			t.Fatalf("launches --json: %v:\n%s", err, o)
		}
		first, second = nil, nil
		for _, l := range ls {
			if l.ID == id {
				second = l.Egress
			} else {
				first = l.Egress
			}
		}
		if (second != nil && second.Allowed > 0) || time.Now().After(end) {
			break
		}
	}
	if first == nil || first.Allowed != 1 || first.Refused != 1 || first.LastRefused != "evil.outside.test:443" {
		t.Errorf("first launch egress = %+v", first)
	}
	if second == nil || second.Allowed != 1 || second.BytesDown == 0 {
		t.Errorf("revoked launch egress = %+v", second)
	}
	t.Logf("slow: %s (%d bytes before revocation)", strings.TrimSpace(done), len(slow))

	// The counters of ended launches come back from the audit rows after a restart.
	if first == nil || second == nil {
		return
	}
	waitFor(t, "the revoked launch ended", func() bool {
		o, _ := abx("launches", "--json")
		var ls []api.Launch
		json.Unmarshal([]byte(o), &ls)
		for _, l := range ls {
			if l.ID == id {
				return l.State == api.StateExited || l.State == api.StateFailed
			}
		}
		return false
	})
	o, err = abx("launches", "--json")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]api.EgressStats{}
	var ls []api.Launch
	json.Unmarshal([]byte(o), &ls)
	for _, l := range ls {
		if l.Egress != nil {
			w := *l.Egress
			w.Refusals = nil // the list of refused targets is the running daemon's only (docs/egress.md)
			want[l.ID] = w
		}
	}
	pidb, err := os.ReadFile(filepath.Join(dirs["run"], "agentbox", "daemon.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidb)))
	if o, err := abx("daemon", "stop"); err != nil {
		t.Fatalf("daemon stop: %v: %s", err, o)
	}
	waitFor(t, "the daemon gone", func() bool { return unix.Kill(pid, 0) != nil })
	if o, err := abx("daemon", "--detach"); err != nil {
		t.Fatalf("daemon --detach: %v: %s", err, o)
	}
	o, err = abx("launches", "--json")
	if err != nil {
		t.Fatal(err)
	}
	ls = nil
	if err := json.Unmarshal([]byte(o), &ls); err != nil {
		t.Fatalf("launches --json: %v:\n%s", err, o)
	}
	for _, l := range ls {
		if w, ok := want[l.ID]; ok && (l.Egress == nil || !reflect.DeepEqual(*l.Egress, w)) {
			t.Errorf("launch %s after the restart: egress %+v, want %+v", l.ID, l.Egress, w)
		}
	}
	if len(want) != 2 {
		t.Errorf("egress counters before the restart for %d launches, want 2", len(want))
	}
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// TestEgressExpectedRefusals runs real curl in a real box under a profile (from the user's
// configuration) that names one target among its expectedRefusals: both requests are refused
// and audited, the launch's record marks the expected one, with the profile's reason, and
// only that one.
func TestEgressExpectedRefusals(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on this host")
	}
	td := startDaemon(t, nil)
	cfg := "egress: deny\nprograms:\n  tipper:\n    executables: [curl]\n    expectedRefusals:\n" +
		"      - {target: tips.example.org:443, why: \"fetched at every start, no setting turns it off\"}\n"
	if err := os.MkdirAll(filepath.Dir(td.config), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(td.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := td.runToEnd(t, &api.LaunchRequest{Program: "curl", Path: curl, Workspace: td.work,
		Args: []string{"-sS", "--max-time", "20", "https://tips.example.org/tip.toml", "https://other.example.org/"}})
	if l.Profile != "tipper" {
		t.Fatalf("launch profile %q, want tipper", l.Profile)
	}
	var got *api.EgressStats
	ls, err := td.c.Launches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ls {
		if x.ID == l.ID {
			got = x.Egress
		}
	}
	if got == nil {
		t.Fatal("no egress record")
	}
	want := []api.EgressRefusal{
		{Target: "tips.example.org:443", Key: egress.ConfigKey, Expected: true, Why: "fetched at every start, no setting turns it off"},
		{Target: "other.example.org:443", Key: egress.ConfigKey},
	}
	if got.Refused != 2 || !reflect.DeepEqual(got.Refusals, want) {
		t.Errorf("egress record = %+v, want 2 refused: %+v", *got, want)
	}
	// Still audited: one row per refused request.
	if rows := egressAuditRows(t, td, l.ID, 2); len(rows) != 2 {
		t.Errorf("%d audit rows, want 2: %+v", len(rows), rows)
	}
}
