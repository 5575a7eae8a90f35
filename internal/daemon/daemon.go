// Package daemon is the per-user daemon: it owns launches, their store records and supervision,
// and serves the local API.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/connlimit"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/hostprog"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/proc"
	"github.com/agentbox/agentbox/internal/readiness"
	"github.com/agentbox/agentbox/internal/recordlimit"
	"github.com/agentbox/agentbox/internal/relay/session"
	"github.com/agentbox/agentbox/internal/safesocket"
	"github.com/agentbox/agentbox/internal/shim"
	"github.com/agentbox/agentbox/internal/store"
)

// Options configure a daemon. The zero value uses the calling user's directories.
type Options struct {
	// RuntimeDir overrides safesocket.RuntimeDir() ("" means the default).
	RuntimeDir string
	// StateDir overrides safesocket.StateDir() ("" means the default).
	StateDir string
	// Config is the configuration load options ("" paths mean the defaults).
	Config config.LoadOptions
	// Logger receives the daemon's log; nil means a text logger on stderr.
	Logger *slog.Logger
	// Version is reported by /v0/info; "" means "dev".
	Version string

	// wrapStore, in tests, wraps the store to inject failures.
	wrapStore func(launchStore) launchStore
	// noSpare, in tests, makes every launch start its shim anew.
	noSpare bool
	// settleWait, in tests, replaces settleWait, the stop's wait for settlements under way.
	settleWait time.Duration
	// machineCPU, in tests, replaces proc.ReadMachineCPU for refillSpareWhenIdle, and
	// spareRefillMax (non-zero) the longest it waits.
	machineCPU     func() (proc.MachineCPU, error)
	spareRefillMax time.Duration
	// beforeWatch, in tests, runs before the daemon connects its watch to a new shim.
	beforeWatch func(launchDir string)
	// brokers, in tests, replaces what the brokers reach on the host.
	brokers brokerHooks
	// afterEnded, in tests, runs once a launch's end is settled and its client may be
	// answered, before its outcome is committed (settle).
	afterEnded func(id string)
	// beforeBytecode, in tests, runs in each background build of a bytecode mirror before it
	// is made (buildBytecode).
	beforeBytecode func(libs []string)
}

// launchStore is what the daemon needs of the store.
type launchStore interface {
	CreateLaunch(ctx context.Context, l *store.Launch, sessions ...store.Session) error
	SetShim(ctx context.Context, id string, pid int, startTime uint64) error
	SetRunning(ctx context.Context, id string, boxPid int, stages []api.Stage) error
	Finish(ctx context.Context, l *store.Launch) error
	GetLaunch(ctx context.Context, id string) (*store.Launch, error)
	ListLaunches(ctx context.Context, f store.Filter) ([]*store.Launch, error)
	Running(ctx context.Context) ([]*store.Launch, error)
	AddDrift(ctx context.Context, id string, e api.DriftEvent) error
}

// Daemon is a running daemon.
type Daemon struct {
	opts       Options
	log        *slog.Logger
	runtimeDir string
	stateDir   string
	socket     string
	store      launchStore
	db         *store.Store      // the store itself, for what is not a launch record (sessions, audit)
	ctx        context.Context   // lives as long as serve
	conns      *connlimit.Budget // broker connections held, against the descriptor limit (connlimit.go)

	// The brokers and what they share (broker.go), set by startBrokers.
	brokers   broker.List          // in preparation order
	sessions  *session.Registry    // pairing sessions: the relay creates them, egress and ssh check them
	audits    *store.AuditWriter   // relay, git and egress audit rows, committed in batches off the request path
	records   *recordlimit.Budgets // each launch's budget of audit rows and request log lines (internal/recordlimit)
	relay     *relayBroker
	integrity *integrityBroker
	egress    *egressBroker

	// volatile keeps the records of the box caches whose layers boxes mount volatile
	// (volatile.go); set by serve.
	volatile *volatileCaches

	mu       sync.Mutex
	cfg      *config.Effective
	cfgErr   error                  // the last refused configuration, nil when the files in force are valid
	launches map[string]*liveLaunch // live launches (starting or running)
	wg       sync.WaitGroup
	// settling counts the launches whose end is being settled (beginSettle); stopping, set by
	// the daemon's stop (guarded by mu), starts no more: the stop waits for those under way
	// before it closes the store, so that their outcome is committed.
	settling sync.WaitGroup
	stopping bool

	readiness *readiness.Manager // admits launches once the box is proven (readiness.go)

	helper string // the box helper shims start from, "" when from agentbox itself

	spareMu       sync.Mutex
	spare         *shim.Spare // a shim waiting for the next launch (spare.go)
	spareStarting bool
	spareClosed   bool              // closeSpare ran: no spare starts any more
	sparePolling  bool              // refillSpareWhenIdle's poller runs
	spareDeadline time.Time         // when that poller refills, idle or not
	violations    *violationScanner // wrap mode's native-run scanner (violations.go); guarded by mu

	// pythonLibs are the system's Python library folders whose bytecode boxes read
	// (bytecode.go); nil (tests) means none. bytecodeMu serializes the making of the mirrors,
	// in the background (buildBytecode): bytecodeBuilds holds the sets being made, bytecodeWG
	// the builds.
	pythonLibs       []string
	bytecodeMu       sync.Mutex
	bytecodeBuildsMu sync.Mutex
	bytecodeBuilds   map[string]chan struct{}
	bytecodeWG       sync.WaitGroup
	// bytecodeCtx ends when serve returns, however it returns: the builds stop then, and serve
	// waits for them (bytecodeWG) before it releases the daemon's lock.
	bytecodeCtx context.Context

	// started is when the daemon started, and hostPath the PATH it started with, through
	// which it (and its shims) find the host programs they run (internal/hostprog): every
	// workspace is compared with it (hostPathOwner, checkWritable).
	started  time.Time
	hostPath string
}

// hostPrograms are the programs the daemon and its shims run on the host, found through the
// daemon's PATH when it starts (hostprog.Find), before any box runs: git (the checks at exit,
// the git relay's identity), go (go env GOPROXY) and bwrap (the bwrap engine). A credential
// helper is found by the first launch's check that names it (credentialPrograms), and the
// relay runs what was found then.
var hostPrograms = []string{"git", "go", "bwrap"}

// Run starts the daemon and serves until ctx ends. Boxes keep running after it returns.
func Run(ctx context.Context, opts Options) error {
	d, err := newDaemon(opts)
	if err != nil {
		return err
	}
	return d.serve(ctx)
}

func newDaemon(opts Options) (*Daemon, error) {
	d := &Daemon{opts: opts, log: opts.Logger, launches: map[string]*liveLaunch{}, conns: processConnBudget(), pythonLibs: systemPythonLibs(),
		started: time.Now(), hostPath: os.Getenv("PATH")}
	for _, name := range hostPrograms {
		hostprog.Find(name) // a program not found is looked for again at its use
	}
	if d.log == nil {
		d.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	var err error
	if d.runtimeDir = opts.RuntimeDir; d.runtimeDir == "" {
		if d.runtimeDir, err = safesocket.RuntimeDir(); err != nil {
			return nil, err
		}
	}
	if d.stateDir = opts.StateDir; d.stateDir == "" {
		if d.stateDir, err = safesocket.StateDir(); err != nil {
			return nil, err
		}
	}
	d.socket = filepath.Join(d.runtimeDir, "agentbox.sock")
	if d.cfg, err = config.Load(opts.Config); err != nil {
		return nil, err
	}
	if _, err := engine.Get(d.cfg.Config.Engine); err != nil {
		return nil, fmt.Errorf("config engine: %w", err)
	}
	return d, nil
}

func (d *Daemon) serve(ctx context.Context) error {
	lock, err := safesocket.TryLock(filepath.Join(d.runtimeDir, "daemon.lock"))
	if err != nil {
		return fmt.Errorf("another agentbox daemon is running for this user (%s): %w", d.runtimeDir, err)
	}
	defer lock.Unlock()

	st, err := store.Open(filepath.Join(d.stateDir, "agentbox.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	d.store, d.db, d.ctx = st, st, ctx
	d.volatile = &volatileCaches{stateDir: d.stateDir, log: d.log}
	if d.opts.wrapStore != nil {
		d.store = d.opts.wrapStore(st)
	}
	bctx, bcancel := context.WithCancel(ctx)
	d.bytecodeCtx = bctx
	defer d.bytecodeWG.Wait() // after bcancel, which stops them
	defer bcancel()
	d.startBytecode()

	if err := os.MkdirAll(filepath.Join(d.runtimeDir, launchdir.LaunchesDir), 0o700); err != nil {
		return fmt.Errorf("launches dir: %w", err)
	}
	d.useHelper() // before the integrity broker, which pins the helper
	if err := d.startBrokers(); err != nil {
		return err
	}
	d.readopt(ctx)
	d.startReadiness(ctx)
	d.refillSpare()
	defer d.closeSpare()
	d.startViolations(ctx)
	go d.pruneLoop(ctx)

	ln, err := safesocket.Listen(d.socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", d.socket, err)
	}
	pidFile := filepath.Join(d.runtimeDir, "daemon.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("pid file: %w", err)
	}
	srv := &http.Server{
		Handler:           d.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			// safesocket's listener admitted only our uid outside any box: full permission.
			return context.WithValue(ctx, permKey{}, permWrite)
		},
	}
	d.log.Info("agentbox daemon listening", "socket", d.socket, "engine", d.currentConfig().Engine, "pid", os.Getpid())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		d.log.Warn("shutdown", "err", serr)
	}
	if rerr := os.Remove(pidFile); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		d.log.Warn("remove pid file", "err", rerr)
	}
	d.stopWatchers()
	d.awaitSettlements()
	d.volatile.flush() // no launch starts any more
	d.stopBrokers()    // before the store closes
	d.log.Info("agentbox daemon stopped; boxes keep running")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// currentConfig returns the configuration in force.
func (d *Daemon) currentConfig() config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.Config
}
