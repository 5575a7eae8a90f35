package daemon

import (
	"time"

	"github.com/agentbox/agentbox/internal/shim"
)

// The daemon keeps one shim started ahead of the next launch (shim.Spare), so that a launch
// does not wait for a process to start and initialize: the spare only waits for its launch
// directory. It is replaced after each use, discarded when the executable changed under it,
// and exits when the daemon does.

// takeSpare takes the spare shim for a launch, if one is ready; nil otherwise. (A spare never
// runs a stale program: shims start from the sealed copy of the helper, or from the daemon's
// own /proc/self/exe, neither of which can change.) The replacement starts once the launch
// no longer needs the CPU: spareRefillDelay after its program started, or when it ended or
// failed, whichever comes first. Started at once, the replacement's three processes competed
// for the CPU with the launch's own on a two-core machine; started when the program did, with
// its first moments and its exit (docs/benchmarks.md).
func (d *Daemon) takeSpare() *shim.Spare {
	d.spareMu.Lock()
	sp := d.spare
	d.spare = nil
	d.spareMu.Unlock()
	return sp
}

// spareRefillDelay is how long after a launch's program started its spare is replaced.
const spareRefillDelay = 250 * time.Millisecond

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
