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
// ran in the middle of Claude Code's start (about a second here), used 80–100 ms of CPU
// there and kept its main thread waiting about 70 ms longer (docs/benchmarks.md, "the
// spare's refill").
func (d *Daemon) takeSpare() *shim.Spare {
	d.spareMu.Lock()
	sp := d.spare
	d.spare = nil
	d.spareMu.Unlock()
	return sp
}

// The replacement of a spare waits at least spareRefillDelay after its launch's program
// started, then for a poll interval of spareIdlePoll in which the CPUs the daemon may run on
// had at least spareIdleCPUs of idle time (/proc/stat), and at most spareRefillMax after the
// latest program's start. So the earliest replacement comes spareRefillDelay+spareIdlePoll
// after the program started (the first interval ends then).
const (
	spareRefillDelay = 250 * time.Millisecond
	spareIdlePoll    = 100 * time.Millisecond
	spareRefillMax   = 5 * time.Second
)

// spareIdleCPUs is the idle time an interval needs, in CPUs' worth: one CPU free, or on a
// machine of one CPU 80 % of it (a single clock tick of other work must not fail every poll).
func spareIdleCPUs(cpus int) float64 { return min(1, 0.8*float64(cpus)) }

// refillSpareWhenIdle replaces the spare in the background once the machine has a CPU to
// spare for it (the constants above): a program starting (an agent's first second) keeps a
// two-core machine busy, and the replacement then takes its CPU. One poller serves every
// launch: a program that starts while it waits moves its deadline to spareRefillMax after
// that start. It gives up waiting, and refills, when /proc/stat cannot be read; it stops when
// a spare is there or starting (a launch ended meanwhile and refilled) or the daemon ends.
// /proc/stat counts the host's CPUs: a CPU quota (cgroup cpu.max) is not seen, and a daemon
// limited by one refills as soon as the host's CPUs it may run on are idle enough.
func (d *Daemon) refillSpareWhenIdle() {
	if d.ctx == nil || d.opts.noSpare {
		return
	}
	max := spareRefillMax
	if d.opts.spareRefillMax != 0 {
		max = d.opts.spareRefillMax
	}
	d.spareMu.Lock()
	d.spareDeadline = time.Now().Add(spareRefillDelay + max)
	polling := d.sparePolling
	d.sparePolling = true
	d.spareMu.Unlock()
	if polling {
		return
	}
	read := proc.ReadMachineCPU
	if d.opts.machineCPU != nil {
		read = d.opts.machineCPU
	}
	go func() {
		// wait waits t and says whether to go on: the daemon runs and no spare is there or
		// starting; past says the deadline has passed. When it stops, the poller is done in
		// the same critical section, so a launch that takes the spare after it looked starts
		// a poller of its own.
		wait := func(t time.Duration) (goOn, past bool) {
			select {
			case <-d.ctx.Done():
			case <-time.After(t):
			}
			d.spareMu.Lock()
			defer d.spareMu.Unlock()
			goOn = d.spare == nil && !d.spareStarting && !d.spareClosed && d.ctx.Err() == nil
			if !goOn {
				d.sparePolling = false
			}
			return goOn, time.Now().After(d.spareDeadline)
		}
		if goOn, _ := wait(spareRefillDelay); !goOn {
			return
		}
		prev, err := read()
		for err == nil {
			goOn, past := wait(spareIdlePoll)
			if !goOn {
				return
			}
			if past {
				break
			}
			var cur proc.MachineCPU
			if cur, err = read(); err == nil && cur.IdleCores(prev) >= spareIdleCPUs(cur.CPUs) {
				break
			}
			prev = cur
		}
		d.spareMu.Lock()
		d.sparePolling = false
		d.spareMu.Unlock()
		d.refillSpare()
	}()
}

// refillSpare starts a spare in the background unless one is there or starting.
func (d *Daemon) refillSpare() {
	d.spareMu.Lock()
	defer d.spareMu.Unlock()
	if d.spare != nil || d.spareStarting || d.spareClosed || d.opts.noSpare || d.ctx == nil || d.ctx.Err() != nil {
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
		case d.spare != nil || d.spareClosed || d.ctx.Err() != nil:
			sp.Close()
		default:
			d.spare = sp
		}
	}()
}

// closeSpare ends the spare (at shutdown); no spare starts after it.
func (d *Daemon) closeSpare() {
	d.spareMu.Lock()
	defer d.spareMu.Unlock()
	d.spareClosed = true
	if d.spare != nil {
		d.spare.Close()
		d.spare = nil
	}
}
