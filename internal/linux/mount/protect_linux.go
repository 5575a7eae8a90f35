package mount

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/plan"
)

// Protection is what a box's init (PID 1: the native engine's box-init, the bwrap engine's
// bwrap-init) runs for the box's life to keep its protected paths, once its filesystem is
// built: the Keeper (binds and masks kept in place, a path the host removed guarded), the
// staged copies copied back as the box writes them, and the guard of the workspace's absent
// protected paths. Its lines go to the init's stderr, which is the box's.
type Protection struct {
	who      string
	keeper   *Keeper
	guard    *changes.Guard
	syncDone chan struct{}
	synced   chan struct{}
	stopping atomic.Bool
	stopped  chan struct{}
	finish   sync.Once
	emptied  bool // what Finish reported
}

// Protect starts protecting root's box, before the program starts: the folders of its masks
// and binds are watched (Watch), the staged copies followed, and, when guard is not nil, the
// workspace's absent protected paths are guarded from now on (a box whose paths cannot be
// watched must not start: the error says so). who names the init in its lines ("box-init").
// Call Started once the program runs, Finish once it has exited, and Close.
func Protect(root *Root, guard *changes.Guard, who string) (*Protection, error) {
	keeper, err := root.Watch()
	if err != nil {
		return nil, err
	}
	p := &Protection{who: who, keeper: keeper, guard: guard, syncDone: make(chan struct{}), synced: make(chan struct{}),
		stopped: make(chan struct{})}
	// The staged copies the box writes (each on a bounded tmpfs) are copied back to the host's
	// copies as the box writes them, and a last time once its processes are gone (Finish):
	// before the launch's exit is reported, so that the daemon collects what the box wrote last.
	go func() {
		defer close(p.synced)
		keeper.SyncStaged(p.syncDone, p.say)
	}()
	if guard != nil {
		if err := guard.Scan(); err != nil {
			p.finishSync()
			keeper.Close()
			return nil, fmt.Errorf("guard the workspace's absent protected paths: %w", err)
		}
		go guard.Run()
		keeper.Guard = func(path string, dir bool, beneath string) error {
			p.say(path + " was removed on the host: from now on what appears there is kept as a proposed change")
			return guard.Add(plan.Guard{Path: path, Dir: dir, Beneath: beneath})
		}
	}
	return p, nil
}

func (p *Protection) say(msg string) { fmt.Fprintf(os.Stderr, "agentbox %s: %s\n", p.who, msg) }

// Started keeps the protected binds and masks in place from now on (execstage.Options.Started;
// a loss seen before the program ran is caught by the first read of the mount table). When one
// cannot be kept, the box is stopped, and what appeared at a path the host removed is moved
// aside (Quarantine).
func (p *Protection) Started(pid int) {
	go p.keeper.Run(func(string) {}, func(msg, removed string) {
		p.stopping.Store(true)
		defer close(p.stopped)
		p.say(msg + "; stopping the box")
		unix.Kill(-1, unix.SIGKILL) // from PID 1: every other process of the box
		if removed == "" {
			return
		}
		if aside, err := Quarantine(removed); err != nil {
			p.say(fmt.Sprintf("%s: %v", removed, err))
		} else if aside != "" {
			p.say(fmt.Sprintf("what appeared at %s after the host removed it is moved to %s", removed, aside))
		}
	})
}

// Finish ends the protection once the program has exited: a stop by the keeper may still be
// moving aside what the box created (it is waited for, bounded); the box's other processes are
// killed, so that nothing creates a guarded path after the guard's last pass, which moves out
// what is there and keeps the final content of what the box wrote; then the staged copies are
// copied back a last time. It reports whether every other process of the box is gone (the
// kill is waited for, bounded): only then may the init report the box's end before its own
// exit (execstage.Options.Exited). The inotify instances are released by Close, which the
// init calls after that report. A second call does nothing and reports the same.
func (p *Protection) Finish() (emptied bool) {
	p.finish.Do(func() {
		if p.stopping.Load() {
			select {
			case <-p.stopped:
			case <-time.After(quarantineWait + 5*time.Second): // Quarantine's own bound, and its moves
			}
		}
		killOthers()
		// A removal the keeper has not handled yet is guarded before the guard's last pass (or,
		// without a guard, stops the box and moves aside what appeared, as a stop does): the
		// keeper's loop has ended when the box's end is reported.
		p.keeper.Settle()
		if p.guard != nil {
			if err := p.guard.Finish(); err != nil {
				p.say(fmt.Sprintf("guarding the protected paths: %v", err))
			}
		}
		p.emptied = p.finishSync()
	})
	return p.emptied
}

// Instances returns the protection's inotify instances, once Finish has run: an init hands
// them to its shim with the report of the box's end (execstage.ReportEnded), so that the
// kernel's release of their watches, a grace period of milliseconds, comes when the shim
// closes them, holding up neither the init's exit nor the launch's end. Close still closes
// the init's own descriptors (cheap then: the shim holds the instances).
func (p *Protection) Instances() []int {
	fds := p.keeper.instances()
	if p.guard != nil {
		if fd := p.guard.Instance(); fd >= 0 {
			fds = append(fds, fd)
		}
	}
	return fds
}

// Close ends the protection as Finish does (unless Finish has) and releases its inotify
// instances, side by side: the kernel frees each one's watches after a grace period.
func (p *Protection) Close() {
	p.Finish()
	var wg sync.WaitGroup
	wg.Go(p.keeper.Close)
	if p.guard != nil {
		wg.Go(func() { p.guard.Close() }) // its last pass's errors were said by Finish
	}
	wg.Wait()
}

// finishSync kills the box's other processes, ends the staged copies' sync after a last copy
// and reports whether the others are gone.
func (p *Protection) finishSync() bool {
	emptied := killOthers()
	close(p.syncDone)
	<-p.synced
	return emptied
}

// killOthers kills every other process of the box (from PID 1) and waits, bounded, until they
// are gone; it reports whether they are.
func killOthers() bool {
	unix.Kill(-1, unix.SIGKILL)
	for i := 0; i < 200; i++ {
		if !ns.OthersLeft() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return !ns.OthersLeft()
}
