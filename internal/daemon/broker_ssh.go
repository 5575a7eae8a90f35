package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/sshbroker"
)

func init() {
	registerBroker(30, func(d *Daemon) (broker, error) {
		return &sshBroker{d: d, live: map[string]*sshLaunch{}}, nil
	})
}

// sshConfigOf returns the git.ssh section of a configuration.
var sshConfigOf = func(c config.Config) sshbroker.Config { return c.Git.SSH.Broker() }

// sshSessionDone returns a channel closed when the launch's pairing session is revoked or
// ends, so that revocation cuts the box's agent requests and ssh legs. The relay broker
// prepares before the ssh broker, so the session exists.
var sshSessionDone = func(d *Daemon, launchID string) <-chan struct{} {
	if d.relay == nil {
		return nil
	}
	if s := d.relay.session(launchID); s != nil {
		return s.Done()
	}
	return nil
}

// sshKnownHosts, when set (tests), lists the known_hosts files seeded into boxes instead of
// the user's and the system's.
var sshKnownHosts []string

// sshStateFile, in the launch directory (not the run directory the box sees), keeps the
// git.ssh the launch started with, so that a restarted daemon serves the same legs.
const sshStateFile = "sshbroker.json"

// sshBroker serves each launch's agent socket and ssh legs (internal/sshbroker) when
// git.ssh.hosts is configured; without it, it adds nothing to the plan.
type sshBroker struct {
	d *Daemon

	mu   sync.Mutex
	live map[string]*sshLaunch
}

type sshLaunch struct {
	l      *sshbroker.Launch
	cancel context.CancelFunc
}

func (b *sshBroker) name() string { return "ssh" }

func (b *sshBroker) prepare(ctx context.Context, bl *brokerLaunch, c *plan.Contributions) error {
	cfg := sshConfigOf(bl.Config)
	if !cfg.Enabled() {
		return nil
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	state, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(bl.RunDir), sshStateFile), state, 0o600); err != nil {
		return fmt.Errorf("save ssh broker state: %w", err)
	}
	l, err := b.start(bl, cfg, false)
	if err != nil {
		return err
	}
	add := l.Contributions()
	c.Env = append(c.Env, add.Env...)
	c.Forwards = append(c.Forwards, add.Forwards...)
	return nil
}

func (b *sshBroker) resume(ctx context.Context, bl *brokerLaunch) error {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(bl.RunDir), sshStateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the launch started without ssh hosts
	}
	if err != nil {
		return fmt.Errorf("read ssh broker state: %w", err)
	}
	var cfg sshbroker.Config
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("read ssh broker state: %w", err)
	}
	_, err = b.start(bl, cfg, true)
	return err
}

func (b *sshBroker) start(bl *brokerLaunch, cfg sshbroker.Config, resume bool) (*sshbroker.Launch, error) {
	// The broker's session: the launch's relay session when wired, and in any case the
	// launch's own life (end cancels it).
	sctx, cancel := context.WithCancel(context.Background())
	if sshSessionDone != nil {
		if done := sshSessionDone(b.d, bl.ID); done != nil {
			go func() {
				select {
				case <-done:
					cancel()
				case <-sctx.Done():
				}
			}()
		}
	}
	l, err := sshbroker.Start(sshbroker.Options{
		Config:     cfg,
		RunDir:     bl.RunDir,
		Home:       bl.Home,
		KnownHosts: sshKnownHosts,
		Done:       sctx.Done(),
		Logger:     b.d.log.With("launch", bl.ID),
		Resume:     resume,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	b.mu.Lock()
	old := b.live[bl.ID]
	b.live[bl.ID] = &sshLaunch{l: l, cancel: cancel}
	b.mu.Unlock()
	if old != nil {
		b.stop(bl.ID, old)
	}
	return l, nil
}

func (b *sshBroker) end(id string) {
	b.mu.Lock()
	sl := b.live[id]
	delete(b.live, id)
	b.mu.Unlock()
	if sl != nil {
		b.stop(id, sl)
	}
}

// stop closes a launch's broker; what it cuts is logged as closed, not as revoked.
func (b *sshBroker) stop(id string, sl *sshLaunch) {
	if err := sl.l.Close(); err != nil {
		b.d.log.Warn("close ssh broker", "launch", id, "err", err)
	}
	sl.cancel()
}
