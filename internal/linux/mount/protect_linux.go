package mount

import (
	"fmt"
	"os"
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
}

// Protect starts protecting root's box, before the program starts: the folders of its masks
// and binds are watched (Watch), the staged copies followed, and, when guard is not nil, the
// workspace's absent protected paths are guarded from now on (a box whose paths cannot be
// watched must not start: the error says so). who names the init in its lines ("box-init").
// Call Started once the program runs, and Finish once it has exited.
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
// copied back a last time. The init exits, and the launch's exit is reported, only after it.
func (p *Protection) Finish() {
	if p.stopping.Load() {
		select {
		case <-p.stopped:
		case <-time.After(5 * time.Second):
		}
	}
	if p.guard != nil {
		killOthers()
		// A removal the keeper has not handled yet is guarded before the guard's last pass.
		p.keeper.Settle()
		if err := p.guard.Close(); err != nil {
			p.say(fmt.Sprintf("guarding the protected paths: %v", err))
		}
	}
	p.finishSync()
}

func (p *Protection) finishSync() {
	killOthers()
	close(p.syncDone)
	<-p.synced
}

// killOthers kills every other process of the box (from PID 1) and waits, bounded, until they
// are gone.
func killOthers() {
	unix.Kill(-1, unix.SIGKILL)
	for i := 0; i < 200 && ns.OthersLeft(); i++ {
		time.Sleep(5 * time.Millisecond)
	}
}
