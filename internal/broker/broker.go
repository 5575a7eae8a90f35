// Package broker defines the host-side services a launch reaches from its box (the LLM and git
// relay, the integrity watch, the ssh agent broker, the egress proxy) and runs a list of them
// through a launch's life: prepare before the plan is built, resume after a daemon restart,
// end when the box has ended. The daemon builds its list explicitly, each broker from the
// dependencies it is given (internal/daemon, brokers.go); brokertest is the conformance suite
// every broker passes.
package broker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/plan"
)

// Broker is a host-side service a launch reaches from its box.
type Broker interface {
	// Name is the broker's name in logs and errors.
	Name() string
	// Prepare runs before the launch's plan is built. It may create sockets and files under
	// l.RunDir (bound at /run/agentbox in the box) and adds what the box needs to c. An error
	// fails the launch closed: the broker then holds nothing for the launch and has added
	// nothing to c.
	Prepare(ctx context.Context, l *Launch, c *plan.Contributions) error
	// Resume re-creates the host side of a launch that outlived a daemon restart, from what
	// Prepare left in the launch's directories and the store.
	Resume(ctx context.Context, l *Launch) error
	// End releases what Prepare or Resume made; the box has ended or never started. Ending a
	// launch the broker holds nothing for (never prepared, ended already) does nothing.
	End(id string)
}

// Independent is a broker whose Prepare reads nothing the other brokers contribute and whose
// End touches nothing of theirs: List prepares and ends it concurrently with them (the
// integrity snapshot while the relay creates its session; the check at exit while the relay
// ends it).
type Independent interface {
	Broker
	Independent()
}

// Launch is what a broker knows of a launch.
type Launch struct {
	ID        string
	RunDir    string // host path of the directory bound at /run/agentbox; its parent is the launch directory
	Workspace string
	Home      string
	Program   string // resolved host path
	Profile   string
	Egress    plan.Egress
	Config    config.Config
}

// List is a daemon's brokers in preparation order: a broker sees what the brokers before it
// contributed (the egress proxy takes the relay's pairing). Log receives what Resume cannot
// return; nil discards it.
type List struct {
	Brokers []Broker
	Log     *slog.Logger
}

// Prepare runs every broker's Prepare; on a failure the ones already prepared are ended and c
// is left as it was. Each dependent broker sees what the dependent brokers before it
// contributed; independent ones run alongside. c gets every broker's contributions in list
// order, so a plan never depends on which finished first.
func (bs List) Prepare(ctx context.Context, l *Launch, c *plan.Contributions) error {
	n := len(bs.Brokers)
	parts := make([]plan.Contributions, n)
	errs := make([]error, n)
	prepared := make([]bool, n)
	var wg sync.WaitGroup
	for i, b := range bs.Brokers {
		if _, ok := b.(Independent); ok {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = b.Prepare(ctx, l, &parts[i])
				prepared[i] = errs[i] == nil
			}()
		}
	}
	var seen plan.Contributions // what the dependent brokers contributed so far
	for i, b := range bs.Brokers {
		if _, ok := b.(Independent); ok {
			continue
		}
		before := seen
		if errs[i] = b.Prepare(ctx, l, &seen); errs[i] != nil {
			seen = before
			break
		}
		parts[i], prepared[i] = since(before, seen), true
	}
	wg.Wait()
	var first error
	for i, b := range bs.Brokers {
		if errs[i] != nil && first == nil {
			first = fmt.Errorf("%s: %w", b.Name(), errs[i])
		}
	}
	if first != nil {
		for i, b := range bs.Brokers {
			if prepared[i] {
				b.End(l.ID)
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

// Resume re-creates the host side of a re-adopted launch in every broker, in list order; a
// failure is logged (the box keeps running; what the broker served is unavailable until it
// ends).
func (bs List) Resume(ctx context.Context, l *Launch) {
	for _, b := range bs.Brokers {
		if err := b.Resume(ctx, l); err != nil && bs.Log != nil {
			bs.Log.Error("resume broker for re-adopted launch", "broker", b.Name(), "launch", l.ID, "err", err)
		}
	}
}

// End releases every broker's state for a launch and returns once all have. The independent
// brokers end alongside the others (the integrity check at exit while the relay commits the
// session's end), the others in list order.
func (bs List) End(id string) {
	var wg sync.WaitGroup
	for _, b := range bs.Brokers {
		if _, ok := b.(Independent); ok {
			wg.Go(func() { b.End(id) })
		}
	}
	for _, b := range bs.Brokers {
		if _, ok := b.(Independent); !ok {
			b.End(id)
		}
	}
	wg.Wait()
}
