package daemon

import (
	"context"
	"fmt"
	"sort"

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

// prepareBrokers runs every broker's prepare; on failure the ones already prepared are ended.
func (d *Daemon) prepareBrokers(ctx context.Context, bl *brokerLaunch, c *plan.Contributions) error {
	for i, b := range d.brokers {
		if err := b.prepare(ctx, bl, c); err != nil {
			for _, done := range d.brokers[:i] {
				done.end(bl.ID)
			}
			return fmt.Errorf("%s: %w", b.name(), err)
		}
	}
	return nil
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
