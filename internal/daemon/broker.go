package daemon

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/plan"
)

// broker is a host-side service a launch reaches from its box (the LLM relay, the git relay,
// the ssh agent broker, the egress proxy, the integrity watch). Each broker is one file of this
// package that adds itself to the daemon's broker list.
type broker interface {
	// name is the broker's name in logs and errors.
	name() string
	// prepare runs before the launch's plan is built. It may create sockets and files under
	// bl.RunDir (bound at /run/agentbox in the box) and adds what the box needs to c. An error
	// fails the launch closed.
	prepare(ctx context.Context, bl *brokerLaunch, c *plan.Contributions) error
	// resume re-creates the host side of a launch that outlived a daemon restart.
	resume(ctx context.Context, bl *brokerLaunch) error
	// end releases what prepare or resume made; the box has ended or never started.
	end(id string)
}

// brokerLaunch is what a broker knows of a launch.
type brokerLaunch struct {
	ID        string
	RunDir    string // host path of the directory bound at /run/agentbox
	Workspace string
	Home      string
	Program   string // resolved host path
	Profile   string
	Egress    plan.Egress
	Config    config.Config
}

// independentBroker is a broker whose prepare reads nothing the other brokers contribute: it
// prepares concurrently with them (the integrity snapshot while the relay creates its session).
type independentBroker interface {
	broker
	independent()
}

// prepareBrokers runs every broker's prepare; on failure the ones already prepared are ended.
// Each broker sees what the dependent brokers before it contributed; independent brokers run
// alongside. c gets every broker's contributions in broker order, so a plan never depends on
// which finished first.
func (d *Daemon) prepareBrokers(ctx context.Context, bl *brokerLaunch, c *plan.Contributions) error {
	parts := make([]plan.Contributions, len(d.brokers))
	errs := make([]error, len(d.brokers))
	prepared := make([]bool, len(d.brokers))
	var wg sync.WaitGroup
	for i, b := range d.brokers {
		if _, ok := b.(independentBroker); ok {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = b.prepare(ctx, bl, &parts[i])
				prepared[i] = errs[i] == nil
			}()
		}
	}
	var seen plan.Contributions // what the dependent brokers contributed so far
	for i, b := range d.brokers {
		if _, ok := b.(independentBroker); ok {
			continue
		}
		before := seen
		if errs[i] = b.prepare(ctx, bl, &seen); errs[i] != nil {
			seen = before
			break
		}
		parts[i], prepared[i] = since(before, seen), true
	}
	wg.Wait()
	var first error
	for i, b := range d.brokers {
		if errs[i] != nil && first == nil {
			first = fmt.Errorf("%s: %w", b.name(), errs[i])
		}
	}
	if first != nil {
		for i, b := range d.brokers {
			if prepared[i] {
				b.end(bl.ID)
			}
		}
		return first
	}
	for _, p := range parts {
		c.Env = append(c.Env, p.Env...)
		c.Forwards = append(c.Forwards, p.Forwards...)
		c.Mounts = append(c.Mounts, p.Mounts...)
		c.ReadOnly = append(c.ReadOnly, p.ReadOnly...)
		c.ReadWrite = append(c.ReadWrite, p.ReadWrite...)
		c.Guards = append(c.Guards, p.Guards...)
		if p.ChangesDir != "" {
			c.ChangesDir = p.ChangesDir
		}
	}
	return nil
}

// since is what after holds beyond before (after grew from before by appends).
func since(before, after plan.Contributions) plan.Contributions {
	changesDir := ""
	if after.ChangesDir != before.ChangesDir {
		changesDir = after.ChangesDir
	}
	return plan.Contributions{
		Env:        after.Env[len(before.Env):],
		Forwards:   after.Forwards[len(before.Forwards):],
		Mounts:     after.Mounts[len(before.Mounts):],
		ReadOnly:   after.ReadOnly[len(before.ReadOnly):],
		ReadWrite:  after.ReadWrite[len(before.ReadWrite):],
		Guards:     after.Guards[len(before.Guards):],
		ChangesDir: changesDir,
	}
}

// resumeBrokers re-creates the host side of a re-adopted launch; a failure is logged (the box
// keeps running; what the broker served is unavailable until it ends).
func (d *Daemon) resumeBrokers(ctx context.Context, bl *brokerLaunch) {
	for _, b := range d.brokers {
		if err := b.resume(ctx, bl); err != nil {
			d.log.Error("resume broker for re-adopted launch", "broker", b.name(), "launch", bl.ID, "err", err)
		}
	}
}

// endBrokers releases every broker's state for a launch.
func (d *Daemon) endBrokers(id string) {
	for _, b := range d.brokers {
		b.end(id)
	}
}

// brokerFactory makes a broker for a daemon; order sorts brokers (lower prepares first).
type brokerFactory struct {
	order int
	make  func(d *Daemon) (broker, error)
}

// brokerFactories is filled by each broker file's init.
var brokerFactories []brokerFactory

// registerBroker adds a broker to every daemon made after it.
func registerBroker(order int, make func(d *Daemon) (broker, error)) {
	brokerFactories = append(brokerFactories, brokerFactory{order, make})
}

// makeBrokers builds the daemon's brokers in order.
func (d *Daemon) makeBrokers() error {
	fs := append([]brokerFactory(nil), brokerFactories...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].order < fs[j].order })
	for _, f := range fs {
		b, err := f.make(d)
		if err != nil {
			return err
		}
		d.brokers = append(d.brokers, b)
	}
	return nil
}
