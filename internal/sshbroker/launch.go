package sshbroker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/recordlimit"
)

// Names of the broker's files in a launch's run directory, and their paths in the box.
const (
	AgentSocketName = "ssh-agent.sock"
	SSHConfigName   = "ssh_config"
	KnownHostsName  = "known_hosts"

	BoxAgentSocket = plan.RunDir + "/" + AgentSocketName
	BoxSSHConfig   = plan.RunDir + "/" + SSHConfigName
	BoxKnownHosts  = plan.RunDir + "/" + KnownHostsName
)

// FirstLegPort is the first in-box loopback port given to a leg. A host configured with a
// port of 1024 or more gets that same port in the box when it is free, so that a remote URL
// naming the port (ssh://git@host:2222/repo, where git passes -p 2222 to ssh) reaches its leg
// too.
const FirstLegPort = 7022

// Defaults applied to zero Options fields.
const (
	DefaultDialTimeout = 10 * time.Second
	DefaultMaxConns    = 8
)

// maxSocketPath is the longest unix socket path bind accepts (sun_path less its NUL).
const maxSocketPath = 107

func legSocketName(i int) string { return "ssh-leg-" + strconv.Itoa(i) + ".sock" }

// Contributions returns what the broker adds to a launch's plan for c: SSH_AUTH_SOCK and
// GIT_SSH_COMMAND, and one forward per host. It is pure: the same Config gives the same
// result; a disabled Config gives the zero Contributions, so the plan is unchanged.
func Contributions(c Config) (plan.Contributions, error) {
	legs, err := legsOf(c, "")
	if err != nil || len(legs) == 0 {
		return plan.Contributions{}, err
	}
	out := plan.Contributions{Env: []string{
		"GIT_SSH_COMMAND=ssh -F " + BoxSSHConfig,
		"SSH_AUTH_SOCK=" + BoxAgentSocket,
	}}
	for i, l := range legs {
		out.Forwards = append(out.Forwards, plan.Forward{Port: l.BoxPort, Socket: plan.RunDir + "/" + legSocketName(i)})
	}
	return out, nil
}

// legsOf assigns each host of c its in-box port and socket (under runDir).
func legsOf(c Config, runDir string) ([]Leg, error) {
	cc, err := c.compile()
	if err != nil {
		return nil, err
	}
	legs := make([]Leg, len(cc.hosts))
	used := map[int]bool{}
	for i, h := range cc.hosts {
		legs[i] = Leg{Host: h, Socket: filepath.Join(runDir, legSocketName(i))}
		if h.Port >= 1024 && !used[h.Port] {
			legs[i].BoxPort = h.Port
			used[h.Port] = true
		}
	}
	next := FirstLegPort
	for i := range legs {
		if legs[i].BoxPort != 0 {
			continue
		}
		for used[next] {
			next++
		}
		legs[i].BoxPort = next
		used[next] = true
	}
	return legs, nil
}

// Options configure the broker of one launch.
type Options struct {
	// Config is git.ssh. A disabled Config (no hosts) makes Start fail: the caller starts the
	// broker only when Config.Enabled().
	Config Config
	// RunDir is the launch's run directory on the host, bound at /run/agentbox in the box: a
	// directory of the daemon's user, mode 0700. Required.
	RunDir string
	// AgentSocket is the user's ssh agent. "" means $SSH_AUTH_SOCK of this process; when
	// that is empty too the box's agent answers every list and sign with failure.
	AgentSocket string
	// KnownHosts are the files the box's known_hosts is seeded from. Nil means
	// DefaultKnownHosts(Home).
	KnownHosts []string
	// Home is the user's home directory, for the default KnownHosts. "" means
	// os.UserHomeDir().
	Home string
	// Done is closed when the launch's session is revoked or ends: the agent and the legs
	// then cut what is in flight and refuse what comes. Nil means never.
	Done <-chan struct{}
	// Logger receives one line per agent request and per leg connection. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Dial connects to ssh hosts. Nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTimeout bounds a leg's dial. Zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxConns bounds the concurrent connections to the agent socket, and to each leg. Zero
	// means DefaultMaxConns.
	MaxConns int
	// Bound, when set, wraps each listener of the launch (what names it: "ssh agent" or "ssh
	// leg HOST"): the daemon bounds them by its budget of broker connections, below its
	// descriptor limit (internal/connlimit). Nil means MaxConns alone.
	// refuse answers a connection it refuses with reason, in what the listener's client shows
	// (Refusal).
	Bound func(ln net.Listener, what string, refuse Refusal) net.Listener
	// Resume re-creates the sockets of a launch that outlived a daemon restart and keeps the
	// files its box already reads; the Config must be the one the launch started with.
	Resume bool
	// Records is the launch's record budget (internal/recordlimit), shared with its other
	// brokers: past it the lines about the box's requests and connections are counted, not
	// written, and their count is logged as one summary line per kind. Nil means a budget of
	// the launch's own.
	Records *recordlimit.Budget
	// Journal is the file that keeps the lines the rate limit holds back until their summaries
	// are logged (recordlimit.Limiter.Journal; ReplayRecords). Empty means none.
	Journal string
}

// Launch is the broker of one launch: its agent socket and legs are served until Close.
type Launch struct {
	agentSocket string
	legs        []Leg
	contrib     plan.Contributions
	quit        chan struct{}
	lns         []net.Listener
	wg          sync.WaitGroup
	closeOnce   sync.Once
	log         *slog.Logger
	rec         *recorder
}

// Start writes the launch's ssh_config and known_hosts into opts.RunDir (unless resuming),
// listens on its agent and leg sockets there and serves them. On error nothing is left
// listening.
func Start(opts Options) (*Launch, error) {
	if !opts.Config.Enabled() {
		return nil, errors.New("ssh broker: no host in git.ssh.hosts")
	}
	if !filepath.IsAbs(opts.RunDir) {
		return nil, fmt.Errorf("ssh broker: run dir %q is not absolute", opts.RunDir)
	}
	legs, err := legsOf(opts.Config, opts.RunDir)
	if err != nil {
		return nil, fmt.Errorf("ssh broker: %w", err)
	}
	contrib, err := Contributions(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("ssh broker: %w", err)
	}
	cc, _ := opts.Config.compile()
	keys := make([]string, 0, len(cc.keys))
	for k := range cc.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	l := &Launch{
		agentSocket: filepath.Join(opts.RunDir, AgentSocketName),
		legs:        legs,
		contrib:     contrib,
		quit:        make(chan struct{}),
		log:         log,
		rec:         newRecorder(log, opts.Records, opts.Journal),
	}
	for _, p := range append([]string{l.agentSocket}, socketsOf(legs)...) {
		if len(p) > maxSocketPath {
			return nil, fmt.Errorf("ssh broker: socket path %s is longer than %d bytes; use a shorter $XDG_RUNTIME_DIR", p, maxSocketPath)
		}
	}

	if !opts.Resume {
		if err := writeFiles(opts, legs); err != nil {
			return nil, err
		}
	}

	maxConns := opts.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	upstreamPath := opts.AgentSocket
	if upstreamPath == "" {
		upstreamPath = os.Getenv("SSH_AUTH_SOCK")
	}
	as := &agentServer{keys: keys, done: opts.Done, quit: l.quit, log: l.rec, conns: &budget{max: maxConns}}
	if upstreamPath != "" {
		as.upstream = func() (net.Conn, error) {
			return net.DialTimeout("unix", upstreamPath, upstreamTimeout)
		}
	}
	bound := opts.Bound
	if bound == nil {
		bound = func(ln net.Listener, _ string, _ Refusal) net.Listener { return ln }
	}
	ln, err := listen(l.agentSocket)
	if err != nil {
		return nil, err
	}
	l.lns = append(l.lns, ln)
	agentLn := bound(ln, "ssh agent", as.refusal)
	l.wg.Add(1)
	go func() { defer l.wg.Done(); as.serve(agentLn, &l.wg) }()

	dial := opts.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	timeout := opts.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	for _, leg := range legs {
		ln, err := listen(leg.Socket)
		if err != nil {
			l.Close()
			return nil, err
		}
		l.lns = append(l.lns, ln)
		ls := &legServer{leg: leg, dial: dial, timeout: timeout, done: opts.Done, quit: l.quit, log: l.rec, conns: &budget{max: maxConns}}
		legLn := bound(ln, "ssh leg "+leg.Host.String(), ls.refusal)
		l.wg.Add(1)
		go func() { defer l.wg.Done(); ls.serve(legLn, &l.wg) }()
	}
	hosts := make([]string, len(legs))
	for i, leg := range legs {
		hosts[i] = leg.Host.String() + "→:" + strconv.Itoa(leg.BoxPort)
	}
	log.Info("ssh broker started", "agent", l.agentSocket, "legs", hosts, "keys", len(keys), "upstream", upstreamPath != "", "resume", opts.Resume)
	return l, nil
}

func socketsOf(legs []Leg) []string {
	out := make([]string, len(legs))
	for i, l := range legs {
		out[i] = l.Socket
	}
	return out
}

// writeFiles writes ssh_config and the seeded known_hosts (mode 0600; the box sees them
// through the read-only run directory).
func writeFiles(opts Options, legs []Leg) error {
	files := opts.KnownHosts
	if files == nil {
		home := opts.Home
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return fmt.Errorf("ssh broker: home directory: %w", err)
			}
		}
		files = DefaultKnownHosts(home)
	}
	hosts := make([]Host, len(legs))
	for i, l := range legs {
		hosts[i] = l.Host
	}
	kh, found, err := seedKnownHosts(hosts, files)
	if err != nil {
		return fmt.Errorf("ssh broker: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	for _, h := range hosts {
		if found[h.KnownHostsName()] == 0 {
			log.Warn("ssh broker: no known host key for a configured host; ssh to it will fail host key verification until you add one (ssh-keyscan, or connect once outside the box)",
				"host", h.String(), "files", files)
		}
	}
	for name, data := range map[string][]byte{KnownHostsName: kh, SSHConfigName: sshConfigFile(legs)} {
		if err := writeFile(filepath.Join(opts.RunDir, name), data); err != nil {
			return fmt.Errorf("ssh broker: %w", err)
		}
	}
	return nil
}

// writeFile creates path (it must not exist: the run directory is fresh) with mode 0600.
func writeFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// listen listens on a unix socket at path, replacing a stale socket (from before a daemon
// restart) but nothing else, and makes it 0600.
func listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("ssh broker: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("ssh broker: remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("ssh broker: listen: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("ssh broker: listen: %w", err)
	}
	return ln, nil
}

// Contributions returns what the launch adds to its plan (see the Contributions function).
func (l *Launch) Contributions() plan.Contributions { return l.contrib }

// Legs returns the launch's legs.
func (l *Launch) Legs() []Leg { return append([]Leg(nil), l.legs...) }

// FlushRecords logs now the summaries of the lines the rate limit holds back (the daemon's
// stop); Close does it too.
func (l *Launch) FlushRecords() { l.rec.rl.Flush() }

// AgentSocket returns the host path of the launch's agent socket.
func (l *Launch) AgentSocket() string { return l.agentSocket }

// Close stops serving: the sockets are removed, every connection is closed, and Close
// returns once nothing of the launch runs. It may be called more than once.
func (l *Launch) Close() error {
	var errs []error
	l.closeOnce.Do(func() {
		close(l.quit)
		for _, ln := range l.lns {
			if err := ln.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		l.wg.Wait()
		l.rec.rl.Close()
		l.log.Info("ssh broker stopped", "agent", l.agentSocket)
	})
	return errors.Join(errs...)
}
