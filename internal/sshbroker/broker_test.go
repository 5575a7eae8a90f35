package sshbroker

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// rig is one launch's broker over a real agent and a real sshd.
type rig struct {
	dir      string
	runDir   string
	granted  sshKey
	other    sshKey
	agent    *userAgent
	server   *gitServer
	launch   *Launch
	log      *logBuffer
	done     chan struct{}
	fw       *boxForward // stands in for box-init's forward of the server's leg
	knownHst string      // the user's known_hosts file
}

type rigOptions struct {
	authorize func(r *rig) []sshKey // keys the server accepts; nil means the granted one
	extraKeys []sshKey
	fw        *boxForward
	hosts     func(r *rig) []string // git.ssh.hosts; nil means the server only
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	need(t, "ssh", "ssh-add", "ssh-agent", "ssh-keygen", "git")
	r := &rig{dir: shortTempDir(t), log: &logBuffer{}, done: make(chan struct{})}
	r.granted = keygen(t, filepath.Join(r.dir, "granted"), "ed25519", "granted@test")
	r.other = keygen(t, filepath.Join(r.dir, "other"), "ed25519", "other@test")
	r.agent = startAgent(t, r.dir, append([]sshKey{r.granted, r.other}, o.extraKeys...)...)
	auth := []sshKey{r.granted}
	if o.authorize != nil {
		auth = o.authorize(r)
	}
	r.server = startSSHD(t, r.dir, auth...)
	// The user's known_hosts: the server's key under a hashed name, among unrelated entries.
	r.knownHst = filepath.Join(r.dir, "user_known_hosts")
	kh := "# user's known hosts\n" +
		"example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ\n" +
		r.server.KnownHostsLine("[localhost]:"+itoa(r.server.Port), true) + "\n"
	if err := os.WriteFile(r.knownHst, []byte(kh), 0o600); err != nil {
		t.Fatal(err)
	}
	r.runDir = filepath.Join(r.dir, "run")
	if err := os.Mkdir(r.runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	hosts := []string{r.server.HostEntry()}
	if o.hosts != nil {
		hosts = o.hosts(r)
	}
	l, err := Start(Options{
		Config:      Config{Hosts: hosts, Keys: []string{r.granted.FP}},
		RunDir:      r.runDir,
		AgentSocket: r.agent.Socket,
		KnownHosts:  []string{r.knownHst},
		Done:        r.done,
		Logger:      r.log.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	r.launch = l
	for _, leg := range l.Legs() {
		if leg.Host.Port == r.server.Port {
			r.fw = startForward(t, leg.Socket, o.fw)
		}
	}
	return r
}

func itoa(n int) string { return strconv.Itoa(n) }

// brokerEnv is the environment of a host-side tool pointed at the broker, as the box's is.
func (r *rig) brokerEnv() []string {
	return []string{"SSH_AUTH_SOCK=" + r.launch.AgentSocket(), "GIT_SSH_COMMAND=" + sshCommand(r.runDir, r.fw.port)}
}

func (r *rig) gitEnv() []string { return append(gitIdentity(), r.brokerEnv()...) }

// remote is the server's repository name in the scp-like form the box's git uses.
func (r *rig) remote(name string) string {
	return r.server.User + "@localhost:" + filepath.Join(r.server.Repos, name)
}

func (r *rig) realKeys(t *testing.T) string {
	t.Helper()
	return run(t, r.agent.Env(), "ssh-add", "-l")
}

// TestAgentListsOnlyGrantedKey: ssh-add -l through the broker lists the granted key only.
func TestAgentListsOnlyGrantedKey(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	out := run(t, r.brokerEnv(), "ssh-add", "-l")
	if !strings.Contains(out, r.granted.FP) || strings.Contains(out, r.other.FP) || strings.Count(out, "\n") != 1 {
		t.Fatalf("ssh-add -l through the broker:\n%s\nwant only %s", out, r.granted.FP)
	}
	if l := r.log.lines("op=list", "decision=allow"); len(l) != 1 {
		t.Fatalf("want one list decision line, log:\n%s", r.log)
	}
}

// TestAgentRefusesMutations: removing, locking, unlocking and adding keys fail through the
// broker, each with one refusal line, and the user's agent still holds both keys, unlocked.
func TestAgentRefusesMutations(t *testing.T) {
	t.Parallel()
	extra := filepath.Join(shortTempDir(t), "extra")
	r := newRig(t, rigOptions{})
	extraKey := keygen(t, extra, "ed25519", "extra@test")
	cases := []struct {
		name string
		args []string
		op   string
	}{
		{"RemoveAll", []string{"-D"}, "remove_all"},
		{"Remove", []string{"-d", r.granted.Path + ".pub"}, "remove"},
		{"Lock", []string{"-x"}, "lock"},
		{"Unlock", []string{"-X"}, "unlock"},
		{"Add", []string{extraKey.Path}, "add"},
		{"AddConstrained", []string{"-t", "60", extraKey.Path}, "add_constrained"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := append([]string{"ssh-add"}, c.args...)
			out, err := runErrStdin(r.brokerEnv(), "passphrase\npassphrase\n", cmd...)
			if err == nil {
				t.Fatalf("ssh-add %v through the broker succeeded:\n%s", c.args, out)
			}
			if l := r.log.lines("op="+c.op+" ", "decision=refuse"); len(l) == 0 {
				t.Fatalf("no refusal line for %s; log:\n%s", c.op, r.log)
			}
			real := r.realKeys(t)
			if !strings.Contains(real, r.granted.FP) || !strings.Contains(real, r.other.FP) || strings.Contains(real, extraKey.FP) {
				t.Fatalf("the user's agent changed:\n%s", real)
			}
		})
	}
	// An extension (session-bind, the query extension) is refused locally too.
	c := dialAgent(t, r.launch.AgentSocket())
	if _, err := c.Extension("query", nil); err == nil {
		t.Fatal("extension through the broker succeeded")
	}
	if l := r.log.lines("op=extension", "decision=refuse"); len(l) != 1 {
		t.Fatalf("want one extension refusal, log:\n%s", r.log)
	}
}

func runErrStdin(env []string, stdin string, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, "SSH_ASKPASS=/bin/false", "SSH_ASKPASS_REQUIRE=never", "DISPLAY=")
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func dialAgent(t testing.TB, path string) agent.ExtendedAgent {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return agent.NewClient(c)
}

// TestAgentSign: a granted key signs through the broker and the signature verifies; the other
// key is refused before the user's agent sees the request; RSA SHA-2 flags pass through.
func TestAgentSign(t *testing.T) {
	t.Parallel()
	rsaDir := shortTempDir(t)
	rsaKey := keygen(t, filepath.Join(rsaDir, "rsa"), "rsa", "rsa@test")
	r := newRig(t, rigOptions{extraKeys: []sshKey{rsaKey}})
	// Grant the RSA key too, in a second launch of the same rig.
	runDir := filepath.Join(r.dir, "run2")
	if err := os.Mkdir(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := Start(Options{Config: Config{Hosts: []string{"localhost"}, Keys: []string{r.granted.FP, rsaKey.FP}},
		RunDir: runDir, AgentSocket: r.agent.Socket, KnownHosts: []string{}, Logger: r.log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := dialAgent(t, l.AgentSocket())
	data := make([]byte, 64)
	rand.Read(data)

	sig, err := c.Sign(r.granted.Pub, data)
	if err != nil {
		t.Fatalf("sign with the granted key: %v", err)
	}
	if err := r.granted.Pub.Verify(data, sig); err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	if _, err := c.Sign(r.other.Pub, data); err == nil {
		t.Fatal("the other key signed through the broker")
	}
	if l := r.log.lines("op=sign", "key="+r.other.FP, "decision=deny"); len(l) != 1 {
		t.Fatalf("want one deny line for the other key; log:\n%s", r.log)
	}
	for _, c2 := range []struct {
		flags agent.SignatureFlags
		want  string
	}{{0, ssh.KeyAlgoRSA}, {agent.SignatureFlagRsaSha256, ssh.KeyAlgoRSASHA256}, {agent.SignatureFlagRsaSha512, ssh.KeyAlgoRSASHA512}} {
		sig, err := c.SignWithFlags(rsaKey.Pub, data, c2.flags)
		if err != nil {
			t.Fatalf("rsa sign flags %d: %v", c2.flags, err)
		}
		if sig.Format != c2.want {
			t.Fatalf("rsa sign flags %d: format %s, want %s", c2.flags, sig.Format, c2.want)
		}
		if err := rsaKey.Pub.Verify(data, sig); err != nil {
			t.Fatalf("rsa signature (%s) does not verify: %v", sig.Format, err)
		}
	}
}

// TestGitOverLeg: git clone and push over ssh through the leg work with the granted key, and
// the host key is checked against the seeded known_hosts.
func TestGitOverLeg(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	r.server.BareRepo(t, "repo.git", 0)
	work := filepath.Join(r.dir, "clone")
	run(t, r.gitEnv(), "git", "clone", "-q", r.remote("repo.git"), work)
	if err := os.WriteFile(filepath.Join(work, "new"), []byte("from the box\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, r.gitEnv(), "git", "-C", work, "add", "new")
	run(t, r.gitEnv(), "git", "-C", work, "commit", "-q", "-m", "box commit")
	run(t, r.gitEnv(), "git", "-C", work, "push", "-q", "origin", "main")
	head := strings.TrimSpace(run(t, nil, "git", "-C", filepath.Join(r.server.Repos, "repo.git"), "log", "-1", "--format=%s", "main"))
	if head != "box commit" {
		t.Fatalf("server main is %q after the push", head)
	}
	if l := r.log.lines("op=sign", "key="+r.granted.FP, "decision=allow"); len(l) < 2 {
		t.Fatalf("want a sign allow line per connection; log:\n%s", r.log)
	}
	// A leg's line is written when its connection has closed, which may be a moment after git
	// returned: wait for it (bounded), never for a duration.
	deadline := time.Now().Add(10 * time.Second)
	for len(r.log.lines("ssh leg", "outcome=done")) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if l := r.log.lines("ssh leg", "outcome=done"); len(l) < 2 {
		t.Fatalf("want a leg line per connection; log:\n%s", r.log)
	}
	// A host key that does not match the seeded one is refused: a second server on the same
	// leg address with another host key stands in for a spoofed remote.
	kh, _ := os.ReadFile(filepath.Join(r.runDir, KnownHostsName))
	if !strings.HasPrefix(string(kh), "[localhost]:"+itoa(r.server.Port)+" ssh-ed25519 ") || strings.Contains(string(kh), "example.org") {
		t.Fatalf("seeded known_hosts:\n%s", kh)
	}
}

// TestOtherKeyAuthorizedFails: with only the other (not granted) key authorized on the
// server, authentication through the broker fails.
func TestOtherKeyAuthorizedFails(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{authorize: func(r *rig) []sshKey { return []sshKey{r.other} }})
	r.server.BareRepo(t, "repo.git", 0)
	out, err := runErr(r.gitEnv(), "git", "ls-remote", r.remote("repo.git"))
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Fatalf("ls-remote with only the other key authorized: err=%v\n%s", err, out)
	}
	// Directly against the user's agent the same command works: the broker made the difference.
	env := append(gitIdentity(), r.agent.Env()...)
	env = append(env, "GIT_SSH_COMMAND="+strings.Replace(sshCommand(r.runDir, r.fw.port), "IdentityAgent="+r.launch.AgentSocket(), "IdentityAgent="+r.agent.Socket, 1))
	if out, err := runErr(env, "git", "ls-remote", r.remote("repo.git")); err != nil {
		t.Fatalf("ls-remote with the user's agent: %v\n%s", err, out)
	}
}

// TestUnconfiguredHostHasNoLeg: a host outside git.ssh.hosts gets no forward, no socket and
// no ssh_config entry; ssh to it fails.
func TestUnconfiguredHostHasNoLeg(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	c := r.launch.Contributions()
	if len(c.Forwards) != 1 || c.Forwards[0].Port != r.server.Port {
		t.Fatalf("forwards = %+v, want one for the server", c.Forwards)
	}
	ents, _ := os.ReadDir(r.runDir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "known_hosts ssh-agent.sock ssh-leg-0.sock ssh_config" {
		t.Fatalf("run dir holds %v", names)
	}
	cfg, _ := os.ReadFile(filepath.Join(r.runDir, SSHConfigName))
	if strings.Contains(string(cfg), "other.test") {
		t.Fatal("ssh_config names an unconfigured host")
	}
	out, err := runErr(r.gitEnv(), "git", "ls-remote", r.server.User+"@other.test:/repo.git")
	if err == nil {
		t.Fatalf("ls-remote of an unconfigured host succeeded:\n%s", out)
	}
}

// TestRevocationDuringPush: revoking the session while a push is in flight cuts it (the
// server's ref does not move), and later agent and ssh operations fail.
func TestRevocationDuringPush(t *testing.T) {
	t.Parallel()
	fw := &boxForward{gateAfter: 1 << 20, reached: make(chan struct{}), gate: make(chan struct{})}
	r := newRig(t, rigOptions{fw: fw})
	bare := r.server.BareRepo(t, "repo.git", 0)
	work := filepath.Join(r.dir, "clone")
	run(t, r.gitEnv(), "git", "clone", "-q", r.remote("repo.git"), work)
	writeRandom(t, filepath.Join(work, "big.bin"), 8<<20)
	run(t, r.gitEnv(), "git", "-C", work, "add", "big.bin")
	run(t, r.gitEnv(), "git", "-C", work, "commit", "-q", "-m", "big")
	before := strings.TrimSpace(run(t, nil, "git", "-C", bare, "rev-parse", "main"))

	// Arm the gate only now: the clone above went through freely.
	pushed := make(chan error, 1)
	var pushOut string
	go func() {
		out, err := runErr(r.gitEnv(), "git", "-C", work, "push", "origin", "main")
		pushOut = out
		pushed <- err
	}()
	<-fw.reached // a megabyte of the pack has left the box
	close(r.done)
	close(fw.gate)
	if err := <-pushed; err == nil {
		t.Fatalf("push succeeded across a revocation:\n%s", pushOut)
	}
	if after := strings.TrimSpace(run(t, nil, "git", "-C", bare, "rev-parse", "main")); after != before {
		t.Fatalf("server main moved from %s to %s although the push was cut", before, after)
	}
	if l := r.log.lines("ssh leg", "outcome=canceled"); len(l) != 1 {
		t.Fatalf("want one canceled leg line; log:\n%s", r.log)
	}
	// Later operations fail.
	if out, err := runErr(r.brokerEnv(), "ssh-add", "-l"); err == nil {
		t.Fatalf("ssh-add -l after revocation succeeded:\n%s", out)
	}
	if out, err := runErr(r.gitEnv(), "git", "ls-remote", r.remote("repo.git")); err == nil {
		t.Fatalf("ls-remote after revocation succeeded:\n%s", out)
	}
	if l := r.log.lines("ssh leg", "decision=revoked"); len(l) == 0 {
		t.Fatalf("no revoked leg line; log:\n%s", r.log)
	}
}

// blockingAgent accepts connections and never answers, so that a request stays in flight.
func blockingAgent(t *testing.T, dir string) (string, chan struct{}) {
	path := filepath.Join(dir, "stuck.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := readFrame(c); err == nil {
					got <- struct{}{}
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return path, got
}

// TestRevocationInFlightAgentRequest: a sign request in flight when the session is revoked
// ends in EOF and is logged canceled; a request after it gets EOF too, logged revoked.
func TestRevocationInFlightAgentRequest(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	upstream, got := blockingAgent(t, dir)
	k := keygen(t, filepath.Join(dir, "k"), "ed25519", "k")
	log := &logBuffer{}
	done := make(chan struct{})
	l, err := Start(Options{Config: Config{Hosts: []string{"example.com"}, Keys: []string{k.FP}}, RunDir: dir,
		AgentSocket: upstream, KnownHosts: []string{}, Done: done, Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", l.AgentSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := appendString([]byte{msgSignRequest}, k.Pub.Marshal())
	req = appendString(req, []byte("data"))
	req = binary.BigEndian.AppendUint32(req, 0)
	if _, err := c.Write(frame(req)); err != nil {
		t.Fatal(err)
	}
	<-got // the user's agent holds the request
	close(done)
	if b, err := readFrame(c); !errors.Is(err, io.EOF) {
		t.Fatalf("in-flight request after revocation: reply %x, err %v; want EOF", b, err)
	}
	waitFor(t, "canceled line", func() bool { return len(log.lines("op=sign", "key="+k.FP, "decision=canceled")) == 1 })
	c2, err := net.Dial("unix", l.AgentSocket())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.Write(frame([]byte{msgRequestIDs}))
	if b, err := readFrame(c2); !closedErr(err) {
		t.Fatalf("request after revocation: reply %x, err %v; want the connection closed", b, err)
	}
}

// startNoAgent starts a launch's broker whose user agent does not answer, with its log.
func startNoAgent(t *testing.T) (*Launch, *logBuffer) {
	t.Helper()
	dir := shortTempDir(t)
	log := &logBuffer{}
	l, err := Start(Options{Config: Config{Hosts: []string{"example.com"}}, RunDir: dir,
		AgentSocket: filepath.Join(dir, "no-agent.sock"), KnownHosts: []string{}, Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	return l, log
}

// TestAgentLimits: an oversized or empty frame closes the connection with one log line; the
// ninth concurrent connection gets one failure reply and is closed while eight work; an unreachable user agent answers
// SSH_AGENT_FAILURE.
func TestAgentLimits(t *testing.T) {
	t.Parallel()
	l, log := startNoAgent(t)
	defer l.Close()
	dial := func(t *testing.T) net.Conn {
		c, err := net.Dial("unix", l.AgentSocket())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	roundTrip := func(c net.Conn, body []byte) ([]byte, error) {
		if _, err := c.Write(frame(body)); err != nil {
			return nil, err
		}
		return readFrame(c)
	}

	t.Run("UpstreamUnreachable", func(t *testing.T) {
		b, err := roundTrip(dial(t), []byte{msgRequestIDs})
		if err != nil || len(b) != 1 || b[0] != msgFailure {
			t.Fatalf("list with no user agent: %x %v, want failure", b, err)
		}
		if len(log.lines("op=list", "decision=upstream_unreachable")) != 1 {
			t.Fatalf("log:\n%s", log)
		}
	})
	t.Run("Oversized", func(t *testing.T) {
		c := dial(t)
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], MaxFrame+1)
		c.Write(hdr[:])
		if _, err := readFrame(c); !errors.Is(err, io.EOF) {
			t.Fatalf("oversized frame: err %v, want EOF", err)
		}
		waitFor(t, "oversize line", func() bool { return len(log.lines("exceeds the 262144-byte limit")) == 1 })
	})
	t.Run("AtLimit", func(t *testing.T) {
		// A frame of exactly MaxFrame is read (and refused as a request), not cut.
		body := make([]byte, MaxFrame)
		body[0] = 17
		b, err := roundTrip(dial(t), body)
		if err != nil || len(b) != 1 || b[0] != msgFailure {
			t.Fatalf("frame at the limit: %x %v", b, err)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		c := dial(t)
		c.Write([]byte{0, 0, 0, 0})
		if _, err := readFrame(c); !errors.Is(err, io.EOF) {
			t.Fatalf("empty frame: err %v, want EOF", err)
		}
		waitFor(t, "empty line", func() bool { return len(log.lines("empty agent frame")) == 1 })
	})
	t.Run("Budget", func(t *testing.T) {
		var held []net.Conn
		for i := 0; i < DefaultMaxConns; i++ {
			// Two round trips prove the connection is being served (and counted): one past the
			// budget also gets a reply, the failure, and is closed after it, so its second round
			// trip fails (with one, a refused connection was taken for a held one, a slot freed
			// later as an earlier subtest's connection closed, and the ninth was served). The
			// earlier subtests' connections are released as they close, which may take a
			// moment: a refused one is retried (bounded).
			deadline := time.Now().Add(10 * time.Second)
			for {
				c := dial(t)
				_, err := roundTrip(c, []byte{22})
				if err == nil {
					c.SetDeadline(time.Now().Add(10 * time.Second))
					_, err = roundTrip(c, []byte{22})
					c.SetDeadline(time.Time{})
				}
				if err == nil {
					held = append(held, c)
					break
				}
				c.Close()
				if time.Now().After(deadline) {
					t.Fatalf("connection %d: %v", i, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		// The ninth gets the agent's failure reply (all its protocol can say), then is closed.
		extra := dial(t)
		extra.SetDeadline(time.Now().Add(10 * time.Second))
		if b, err := roundTrip(extra, []byte{msgRequestIDs}); err != nil || len(b) != 1 || b[0] != msgFailure {
			t.Fatalf("a ninth concurrent connection: %x %v, want SSH_AGENT_FAILURE", b, err)
		}
		if _, err := roundTrip(extra, []byte{msgRequestIDs}); err == nil {
			t.Fatal("a ninth concurrent connection was served")
		}
		if len(log.lines("connection budget exhausted")) == 0 {
			t.Fatalf("no budget line; log:\n%s", log)
		}
		held[0].Close()
		waitFor(t, "a slot to free", func() bool {
			c, err := net.Dial("unix", l.AgentSocket())
			if err != nil {
				return false
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			// Served, not refused: a refused connection is closed after its one reply.
			if _, err = roundTrip(c, []byte{22}); err == nil {
				_, err = roundTrip(c, []byte{22})
			}
			return err == nil
		})
	})
}

// closedErr reports whether err means the broker closed the connection: EOF, or a reset when
// it closed before reading what was sent.
func closedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}
