package daemon

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh/agent"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/broker/brokertest"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/profile"
	"github.com/agentbox/agentbox/internal/sshbroker"
	"github.com/agentbox/agentbox/internal/sshbroker/sshtest"
	"github.com/agentbox/agentbox/internal/store"
)

// brokerLives starts daemon lives for the conformance suite: each a Daemon with its own store
// handle and the brokers startBrokers builds — the daemon's own wiring — over the same
// directories; cur is the running life, nil while none runs.
type brokerLives struct {
	hooks brokerHooks
	cur   *Daemon
}

func (bl *brokerLives) start(t *testing.T, dir string) *Daemon {
	t.Helper()
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return filepath.Join(dir, "config")
		}
		return ""
	}
	d, err := newDaemon(Options{RuntimeDir: filepath.Join(dir, "run"), StateDir: filepath.Join(dir, "state"),
		Config: config.LoadOptions{Getenv: getenv, PolicyFile: filepath.Join(dir, "no-policy.yaml")}, Logger: discardLogger(),
		brokers: bl.hooks})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "state", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.store, d.db, d.ctx = st, st, ctx
	if err := d.startBrokers(); err != nil {
		cancel()
		st.Close()
		t.Fatal(err)
	}
	bl.cur = d
	t.Cleanup(cancel)
	return d
}

// stop ends d's life as the daemon process's exit does: every listener and watch of its
// brokers is closed (the kernel closes them when the process exits) and the audit rows are
// committed; nothing is ended — sessions, state files and placeholders stay.
func (bl *brokerLives) stop(d *Daemon) {
	for _, l := range d.relay.launches.All() {
		if l.ln != nil {
			exitClose(l.ln)
		}
	}
	d.relay.mu.Lock()
	if d.relay.shared != nil {
		d.relay.shared.Close()
	}
	d.relay.mu.Unlock()
	for _, l := range d.egress.live.All() {
		exitClose(l.ln)
	}
	for _, b := range d.brokers.Brokers {
		if s, ok := b.(*sshBroker); ok {
			for _, l := range s.live.All() {
				l.l.Close()
			}
		}
	}
	for _, w := range d.integrity.watches.All() {
		w.cancel()
		<-w.done
	}
	d.stopBrokers()
	d.db.Close()
	if bl.cur == d {
		bl.cur = nil
	}
}

// exitClose closes ln as a process's exit does: a unix socket's file stays (net.UnixListener
// would remove it).
func exitClose(ln net.Listener) {
	if u, ok := ln.(*net.UnixListener); ok {
		u.SetUnlinkOnClose(false)
	}
	ln.Close()
}

func (d *Daemon) sshBroker() *sshBroker {
	for _, b := range d.brokers.Brokers {
		if s, ok := b.(*sshBroker); ok {
			return s
		}
	}
	return nil
}

// launchFor returns launch id under the suite's dir as the daemon describes it.
func launchFor(t *testing.T, dir, id string, egressMode plan.Egress, cfg config.Config) *broker.Launch {
	return &broker.Launch{ID: id, RunDir: brokertest.RunDir(t, dir, id), Workspace: filepath.Join(dir, "work"),
		Home: filepath.Join(dir, "home"), Profile: "generic", Egress: egressMode, Config: cfg}
}

// accepts reports whether a unix socket at path accepts a connection.
func accepts(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// relayAnswers sends one relay request with launch l's pairing over what c gave the box (the
// launch's relay socket under egress deny, the shared loopback listener under egress allow):
// nil when the relay admits the pairing (any answer but pairing_invalid).
func relayAnswers(l *broker.Launch, c plan.Contributions) error {
	pairing := envOf(&c, EnvPairing)
	if pairing == "" {
		return errors.New("the box got no pairing")
	}
	tr := &http.Transport{}
	base := envOf(&c, EnvRelayURL)
	if l.Egress == plan.EgressDeny {
		sock := filepath.Join(l.RunDir, relaySocket)
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, base+"/sandbox/anthropic/v1/models", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+pairing)
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("relay request: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), api.CodePairingInvalid) {
		return fmt.Errorf("the relay refused the launch's pairing: %s %s", resp.Status, body)
	}
	return nil
}

// relayHeld lists what the running life holds of launch l for the relay: a live pairing
// session, a relay socket that accepts.
func (bl *brokerLives) relayHeld(l *broker.Launch) []string {
	var held []string
	if bl.cur != nil && bl.cur.sessions.OfLaunch(l.ID) != nil {
		held = append(held, "a live pairing session")
	}
	if accepts(filepath.Join(l.RunDir, relaySocket)) {
		held = append(held, "a relay socket that accepts")
	}
	return held
}

// record records launch l in the running life's store as the launch's record stage does, its
// pairing session with it.
func (bl *brokerLives) record(t *testing.T, l *broker.Launch) {
	t.Helper()
	rec := &store.Launch{Launch: api.Launch{ID: l.ID, Program: "/bin/true", Workspace: l.Workspace, Engine: "native"}}
	if err := bl.cur.store.CreateLaunch(context.Background(), rec, bl.cur.launchSessions(l.ID)...); err != nil {
		t.Fatal(err)
	}
}

// revoke revokes launch l's pairing session in the running life, as `agentbox revoke` does.
func (bl *brokerLives) revoke(t *testing.T, l *broker.Launch) {
	t.Helper()
	s := bl.cur.sessions.OfLaunch(l.ID)
	if s == nil {
		t.Fatalf("launch %s has no live session to revoke", l.ID)
	}
	if err := bl.cur.sessions.Revoke(context.Background(), s.ID()); err != nil {
		t.Fatal(err)
	}
}

func relayHarness(mode plan.Egress) brokertest.Harness {
	bl := &brokerLives{}
	return brokertest.Harness{
		Start: func(t *testing.T, dir string) ([]broker.Broker, func()) {
			d := bl.start(t, dir)
			return []broker.Broker{d.relay}, func() { bl.stop(d) }
		},
		Record: bl.record,
		Launch: func(t *testing.T, dir, id string) *broker.Launch {
			return launchFor(t, dir, id, mode, config.Defaults())
		},
		// A gateway URL the LLM relay refuses.
		Break: func(t *testing.T, l *broker.Launch) { l.Config.Gateway.Anthropic.URL = "ftp://gateway.example.org" },
		Serving: func(t *testing.T, l *broker.Launch, c plan.Contributions) error {
			if bl.cur == nil {
				return errors.New("no daemon runs")
			}
			return relayAnswers(l, c)
		},
		Held:   func(t *testing.T, l *broker.Launch, c plan.Contributions) []string { return bl.relayHeld(l) },
		Revoke: bl.revoke,
	}
}

// TestBrokerConformance runs the broker conformance suite (internal/broker/brokertest) over
// every broker the daemon builds, each from its real dependencies (a store on disk, the
// pairing registry, the runtime and state directories) through startBrokers.
func TestBrokerConformance(t *testing.T) {
	// Every broker startBrokers builds has its harness below: one added there without one
	// fails here.
	covered := []string{"relay", "integrity", "ssh", "egress"}
	bl := &brokerLives{}
	d := bl.start(t, brokertest.Dir(t))
	var built []string
	for _, b := range d.brokers.Brokers {
		built = append(built, b.Name())
	}
	bl.stop(d)
	if !slices.Equal(built, covered) {
		t.Fatalf("the daemon builds the brokers %v; the suite below runs %v", built, covered)
	}
	t.Run("relay/egress-deny", func(t *testing.T) { brokertest.Run(t, relayHarness(plan.EgressDeny)) })
	t.Run("relay/egress-allow", func(t *testing.T) { brokertest.Run(t, relayHarness(plan.EgressAllow)) })
	t.Run("integrity", func(t *testing.T) { brokertest.Run(t, integrityHarness()) })
	t.Run("ssh", func(t *testing.T) { brokertest.Run(t, sshHarness(t)) })
	t.Run("egress", func(t *testing.T) { brokertest.Run(t, egressHarness()) })
}

func integrityHarness() brokertest.Harness {
	bl := &brokerLives{}
	return brokertest.Harness{
		Start: func(t *testing.T, dir string) ([]broker.Broker, func()) {
			d := bl.start(t, dir)
			// The workspace holds protected configuration the watch pins.
			if err := os.WriteFile(filepath.Join(dir, "work", ".mcp.json"), []byte("{}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return []broker.Broker{d.integrity}, func() { bl.stop(d) }
		},
		// The launch's profile holds placeholders in the home for its absent ro and deny
		// entries: a program of the user's with a read-write home folder and a credential file
		// denied in it (no built-in profile keeps a read-write home folder since ~/.gemini
		// became box-owned state).
		Record: bl.record,
		Launch: func(t *testing.T, dir, id string) *broker.Launch {
			cfg := config.Defaults()
			cfg.Programs = map[string]profile.Profile{"cred-tool": {Executables: []string{"cred-tool"}, Home: []profile.HomeEntry{
				{Path: ".cred-tool", Access: "rw", Create: "dir"},
				{Path: ".cred-tool/oauth_creds.json", Access: "deny"},
			}}}
			l := launchFor(t, dir, id, plan.EgressDeny, cfg)
			l.Profile = "cred-tool"
			phs := homePlaceholders(l.Config, l.Profile, l.Home)
			if len(phs) == 0 {
				t.Fatal("the program's absent deny entry holds no home placeholder: the harness needs one")
			}
			for _, ph := range phs {
				// The rw folders they lie in exist, as after the program's first run.
				if err := os.MkdirAll(ph.Beneath, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			return l
		},
		// A launch directory the state cannot be saved in (the daemon's runtime directory lost
		// it): the snapshot made, the placeholders held, then the save fails.
		Break: func(t *testing.T, l *broker.Launch) {
			if err := os.RemoveAll(filepath.Dir(l.RunDir)); err != nil {
				t.Fatal(err)
			}
		},
		// Served: the launch's watch runs and reports a change of a pinned file as drift.
		Serving: func(t *testing.T, l *broker.Launch, c plan.Contributions) error {
			d := bl.cur
			if d == nil {
				return errors.New("no daemon runs")
			}
			iw, ok := d.integrity.watches.Get(l.ID)
			if !ok {
				return errors.New("no watch of the launch")
			}
			_, before, err := d.db.Drift(context.Background(), l.ID)
			if err != nil {
				return err
			}
			mcp := filepath.Join(l.Workspace, ".mcp.json")
			if err := os.WriteFile(mcp, []byte(fmt.Sprintf("{\"n\": %d}\n", time.Now().UnixNano())), 0o600); err != nil {
				return err
			}
			iw.w.Verify(integrity.SourcePeriodic, false)
			_, after, err := d.db.Drift(context.Background(), l.ID)
			if err != nil {
				return err
			}
			if len(after) <= len(before) {
				return fmt.Errorf("the watch reported no drift of %s", mcp)
			}
			return nil
		},
		Held: func(t *testing.T, l *broker.Launch, c plan.Contributions) []string {
			var held []string
			if d := bl.cur; d != nil {
				if _, ok := d.integrity.watches.Get(l.ID); ok {
					held = append(held, "a watch")
				}
				hs, err := d.integrity.reg.Holders()
				if err != nil {
					held = append(held, "placeholder registry unreadable: "+err.Error())
				}
				for _, h := range hs {
					if h == l.ID {
						held = append(held, "placeholders")
					}
				}
			}
			return held
		},
	}
}

func sshHarness(t *testing.T) brokertest.Harness {
	sshtest.Need(t, "ssh-agent", "ssh-add", "ssh-keygen")
	keys := sshtest.ShortTempDir(t)
	granted := sshtest.Keygen(t, filepath.Join(keys, "granted"), "ed25519", "granted@test")
	ag := sshtest.StartAgent(t, keys, granted)
	t.Setenv("SSH_AUTH_SOCK", ag.Socket)
	bl := &brokerLives{hooks: brokerHooks{sshKnownHosts: []string{}}}
	cfg := config.Defaults()
	cfg.Git.SSH = config.GitSSH{Hosts: []string{"git.example.org"}, Keys: []string{granted.FP}}
	return brokertest.Harness{
		Start: func(t *testing.T, dir string) ([]broker.Broker, func()) {
			d := bl.start(t, dir)
			return []broker.Broker{d.relay, d.sshBroker()}, func() { bl.stop(d) }
		},
		Record: bl.record,
		Launch: func(t *testing.T, dir, id string) *broker.Launch {
			return launchFor(t, dir, id, plan.EgressDeny, cfg)
		},
		Break: func(t *testing.T, l *broker.Launch) {
			l.Config.Git.SSH.Hosts = []string{"git.example.org:99999"}
		},
		// Served: the box's agent socket lists the granted key.
		Serving: func(t *testing.T, l *broker.Launch, c plan.Contributions) error {
			conn, err := net.DialTimeout("unix", filepath.Join(l.RunDir, sshbroker.AgentSocketName), time.Second)
			if err != nil {
				return err
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			ks, err := agent.NewClient(conn).List()
			if err != nil {
				return fmt.Errorf("list keys: %w", err)
			}
			if len(ks) != 1 {
				return fmt.Errorf("the box's agent lists %d keys, want the granted one", len(ks))
			}
			return nil
		},
		Held: func(t *testing.T, l *broker.Launch, c plan.Contributions) []string {
			held := bl.relayHeld(l)
			if accepts(filepath.Join(l.RunDir, sshbroker.AgentSocketName)) {
				held = append(held, "an agent socket that accepts")
			}
			return held
		},
		Revoke: bl.revoke,
	}
}

// egressRefuses sends a CONNECT to a host no allowlist holds through launch l's proxy socket
// with its pairing: nil when the proxy admits the pairing and refuses the target by its
// allowlist.
func egressRefuses(l *broker.Launch, c plan.Contributions) error {
	pairing := envOf(&c, EnvPairing)
	if pairing == "" {
		return errors.New("the box got no pairing")
	}
	conn, err := net.DialTimeout("unix", filepath.Join(l.RunDir, egressSocket), time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	auth := base64.StdEncoding.EncodeToString([]byte("agentbox:" + pairing))
	fmt.Fprintf(conn, "CONNECT refused.example.org:443 HTTP/1.1\r\nHost: refused.example.org:443\r\nProxy-Authorization: Basic %s\r\n\r\n", auth)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		return fmt.Errorf("proxy answer: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), api.CodeEgressRefused) {
		return fmt.Errorf("proxy answered %s %s, want 403 %s", resp.Status, body, api.CodeEgressRefused)
	}
	return nil
}

func egressHarness() brokertest.Harness {
	bl := &brokerLives{}
	return brokertest.Harness{
		Start: func(t *testing.T, dir string) ([]broker.Broker, func()) {
			d := bl.start(t, dir)
			return []broker.Broker{d.relay, d.egress}, func() { bl.stop(d) }
		},
		Record: bl.record,
		Launch: func(t *testing.T, dir, id string) *broker.Launch {
			cfg := config.Defaults()
			cfg.EgressAllow = []string{"registry.example.org"}
			return launchFor(t, dir, id, plan.EgressDeny, cfg)
		},
		Break: func(t *testing.T, l *broker.Launch) { l.Config.EgressAllow = []string{"registry.example.org/path"} },
		Serving: func(t *testing.T, l *broker.Launch, c plan.Contributions) error {
			if bl.cur == nil {
				return errors.New("no daemon runs")
			}
			return egressRefuses(l, c)
		},
		Held: func(t *testing.T, l *broker.Launch, c plan.Contributions) []string {
			held := bl.relayHeld(l)
			if accepts(filepath.Join(l.RunDir, egressSocket)) {
				held = append(held, "a proxy socket that accepts")
			}
			return held
		},
		Revoke: bl.revoke,
	}
}
