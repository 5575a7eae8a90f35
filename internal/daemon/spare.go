package daemon

import (
	"time"

	"github.com/agentbox/agentbox/internal/linux/proc"
	"github.com/agentbox/agentbox/internal/shim"
)

// The daemon keeps one shim started ahead of the next launch (shim.Spare), so that a launch
// does not wait for a process to start and initialize: the spare only waits for its launch
// directory. It is replaced after each use, discarded when the executable changed under it,
// and exits when the daemon does.

// takeSpare takes the spare shim for a launch, if one is ready; nil otherwise. (A spare never
// runs a stale program: shims start from the sealed copy of the helper, or from the daemon's
// own /proc/self/exe, neither of which can change.) The replacement starts once the launch
// no longer needs the CPU (refillSpareWhenIdle), or when it ended or failed, whichever comes
// first. Started at once, the replacement's three processes competed for the CPU with the
// launch's own on a two-core machine; started at a fixed 250 ms after the program did, they
// ran in the middle of Claude Code's start (about a second here) and took 80–100 ms of CPU
// from it (docs/benchmarks.md, "the spare's refill").
func (d *Daemon) takeSpare() *shim.Spare {
	d.spareMu.Lock()
	sp := d.spare
	d.spare = nil
	d.spareMu.Unlock()
	return sp
}

// The replacement of a spare waits at least spareRefillDelay after its launch's program
// started, then for a poll interval of spareIdlePoll in which the machine had at least one
// CPU's worth of idle time (/proc/stat), and at most spareRefillMax.
const (
	spareRefillDelay = 250 * time.Millisecond
	spareIdlePoll    = 100 * time.Millisecond
	spareRefillMax   = 5 * time.Second
)

// refillSpareWhenIdle replaces the spare in the background once the machine has a CPU to
// spare for it (the constants above): a program starting (an agent's first second) keeps a
// two-core machine busy, and the replacement then takes its CPU. It gives up waiting, and
// refills, when /proc/stat cannot be read; it stops when a spare is there or starting (the
// launch ended meanwhile and refilled) or the daemon ends.
func (d *Daemon) refillSpareWhenIdle() {
	if d.ctx == nil {
		return
	}
	go func() {
		read, max := proc.ReadMachineCPU, spareRefillMax
		if d.opts.machineCPU != nil {
			read = d.opts.machineCPU
		}
		if d.opts.spareRefillMax != 0 {
			max = d.opts.spareRefillMax
		}
		deadline := time.Now().Add(max)
		wait := func(t time.Duration) bool {
			select {
			case <-d.ctx.Done():
				return false
			case <-time.After(t):
				return !d.spareReady()
			}
		}
		if !wait(spareRefillDelay) {
			return
		}
		prev, err := read()
		for err == nil && time.Now().Before(deadline) {
			if !wait(spareIdlePoll) {
				return
			}
			var cur proc.MachineCPU
			if cur, err = read(); err == nil && cur.IdleCores(prev) >= 1 {
				break
			}
			prev = cur
		}
		d.refillSpare()
	}()
}

// spareReady reports whether a spare is there or starting.
func (d *Daemon) spareReady() bool {
	d.spareMu.Lock()
	defer d.spareMu.Unlock()
	return d.spare != nil || d.spareStarting
}

// refillSpare starts a spare in the background unless one is there or starting.
func (d *Daemon) refillSpare() {
	d.spareMu.Lock()
	defer d.spareMu.Unlock()
	if d.spare != nil || d.spareStarting || d.opts.noSpare || d.ctx == nil || d.ctx.Err() != nil {
		return
	}
	d.spareStarting = true
	go func() {
		sp, err := shim.StartSpare()
		d.spareMu.Lock()
		defer d.spareMu.Unlock()
		d.spareStarting = false
		switch {
		case err != nil:
			d.log.Warn("start spare shim", "err", err)
		case d.spare != nil || d.ctx.Err() != nil:
			sp.Close()
		default:
			d.spare = sp
		}
	}()
}

// closeSpare ends the spare (at shutdown).
func (d *Daemon) closeSpare() {
	d.spareMu.Lock()
	defer d.spareMu.Unlock()
	if d.spare != nil {
		d.spare.Close()
		d.spare = nil
	}
}
