package daemon

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/launch"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/linux/proc"
	"github.com/agentbox/agentbox/internal/shim"
)

// The stages of a launch's end, recorded after its start's (api.Stage): what each piece of the
// end cost the daemon, for `agentbox launches --json` and bench/startup's breakdown. The
// commit of the record is the one piece not in it.
const (
	// stageBox runs from the watch's connection until the shim's final status: the box's start
	// (an attached launch's waits for its client), its program and its end.
	stageBox = "box"
	// stageEndBrokers is every broker's End: the check at exit among them (issue #20 item 1).
	stageEndBrokers = "end-brokers"
	// stageTopExit is the wait for box-init's exit (or the shim's) after that: the kernel's
	// teardown of the box's namespaces, before the client is answered (e2e TestTreeCleanup).
	stageTopExit = "box-init-exit"
	// stageWorkRemoval is the removal of the overlay work folders, after the answer.
	stageWorkRemoval = "work-removal"
)

// supervise follows a launch's shim until the box has ended, then records the outcome.
func (d *Daemon) supervise(l *liveLaunch) {
	defer d.wg.Done()
	defer close(l.done)
	defer l.markEnded() // (a settle that did not reach its end: its waiters are answered from the store)
	ctx := context.Background()
	d.mu.Lock()
	w := l.watcher
	d.mu.Unlock()
	var err, startErr error
	final := false // the shim sent its final status (shim.EventExit)
	// top is the box's top process (the native engine's box-init), held from the first
	// status that names it: the launch is recorded as ended once it is gone.
	var top *proc.Handle
	defer func() { top.Close() }()
	if w == nil {
		if l.new && d.opts.beforeWatch != nil {
			d.opts.beforeWatch(l.dir)
		}
		if l.run != nil {
			// The last stages of the launch's pipeline, timed with the others (committed: a
			// failure is handled below, not rolled back): the spare's answer, when the
			// answer to the client did not wait for it, then the watch.
			lw := l.launch
			if lw == nil {
				lw = &launch.Launch{Dir: l.dir}
			}
			if lw.Handed() {
				if err = l.run.Do(ctx, lw.Ready()); err != nil {
					startErr = err
				}
			}
			if err == nil {
				if err = l.run.Do(ctx, lw.Watch()); err == nil {
					w = lw.Watcher
				}
			}
			l.rec.Stages = l.run.Stages()
			l.watched = time.Now()
		} else {
			w, err = shim.Watch(l.dir)
		}
	}
	if err == nil {
		d.mu.Lock()
		l.watcher = w
		d.mu.Unlock()
		// Its shim holds the relay's loopback listener while the box runs (egress: allow).
		d.holdRelayListener(l)
		for ev := range w.Events {
			final = final || ev.Kind == shim.EventExit
			if top == nil && !final && ev.Status.BoxPid > 0 {
				// The box's top process when it is its pid namespace's init (box-init), the
				// namespace the shim pins; a short program may have ended before the watch
				// began: the first status names it.
				top, _ = proc.OpenIn(ev.Status.BoxPid, ev.Status.Namespaces["pid"])
			}
			if ev.Status.Execd && l.rec.State == api.StateStarting {
				d.refillSpareWhenIdle() // (spare.go)
				l.rec.State = api.StateRunning
				l.rec.BoxPid = ev.Status.BoxPid
				// Committed beside the events (an fsync): a program that ends at once has its
				// end read meanwhile. The final record waits for it (settle); a first news of
				// the exec that is the final status itself is left to the final record.
				if !final {
					id, pid, stages := l.rec.ID, ev.Status.BoxPid, l.rec.Stages
					l.saving.Go(func() {
						if err := d.store.SetRunning(ctx, id, pid, stages); err != nil {
							d.log.Error("record running", "launch", id, "err", err)
						}
					})
				}
			}
		}
		w.Close()
		if !l.watched.IsZero() {
			l.rec.Stages = append(l.rec.Stages, api.Stage{Name: stageBox, Duration: time.Since(l.watched)})
		}
	} else if startErr != nil {
		// The shim failed before it took the launch (its box never got the request): it
		// refuses the client with the reason, and ends.
		d.log.Error("the launch's shim failed", "launch", l.rec.ID, "err", err)
	} else if l.new && !ended(l.dir) {
		// A box the daemon cannot follow must not run: stop it (its program has not started
		// unless its client attached meanwhile; settle records the failure either way).
		d.log.Error("watch new shim; stopping the box", "launch", l.rec.ID, "err", err)
		if kerr := launch.StopShim(l.dir, l.rec.ShimPid); kerr != nil {
			d.log.Error("stop unwatched box", "launch", l.rec.ID, "err", kerr)
		}
	} else {
		d.log.Warn("watch shim", "launch", l.rec.ID, "err", err)
	}
	if !d.beginSettle() {
		d.log.Info("daemon stopping: the launch's end is left to the next daemon", "launch", l.rec.ID)
		return
	}
	defer d.settling.Done()
	d.settle(ctx, l, startErr, final, top)
	d.refillSpare()
}

// beginSettle registers a launch's settlement, which the daemon's stop then waits for
// (awaitSettlements); false when the stop has begun: the launch is left as it is, running in
// the store with its directory, and the next daemon settles it from what its shim left
// (readopt), rather than have its outcome written to a store being closed.
func (d *Daemon) beginSettle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopping {
		return false
	}
	d.settling.Add(1)
	return true
}

// settleWait bounds the daemon stop's wait for the settlements under way: each of settle's
// own waits is bounded by 10 s, the check at exit by the workspace's size. With the HTTP
// server's shutdown (5 s at most) it stays within `agentbox daemon stop`'s wait (30 s).
const settleWait = 20 * time.Second

// awaitSettlements starts no more settlements and waits for those under way (settleWait at
// most, Options.settleWait in tests), so that a launch whose client was answered has its
// outcome committed before the store closes. One still under way after that is logged: its
// record fails and its directory stays for the next daemon (settle).
func (d *Daemon) awaitSettlements() {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	max := settleWait
	if d.opts.settleWait != 0 {
		max = d.opts.settleWait
	}
	done := make(chan struct{})
	go func() { d.settling.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(max):
		d.log.Warn("daemon stopping: launches still settling are left to the next daemon", "waited", max)
	}
}

// settle records how a launch ended, from the status its shim left, and removes its launch
// directory. A shim that vanished without a status makes the launch "lost", unless it said
// why (startErr, its start-up failure): the launch then failed for that reason. final says
// the shim sent its final status (shim.EventExit), which it writes before; top, when not nil,
// is the box's top process, held since its program's exec.
func (d *Daemon) settle(ctx context.Context, l *liveLaunch, startErr error, final bool, top *proc.Handle) {
	// The shim writes its status before it sends it to its watchers. Without it, the status is
	// read once the shim is gone. With it, the brokers end at once: a box whose init reported
	// the box's end before its own exit (engine.EventEnded: nothing of the box runs) has its
	// init still exiting meanwhile. The launch is recorded as ended only once the box's top
	// process, the last of its processes, is gone (or, not held, the shim, which exits after
	// reaping it; the shim may still be closing the inotify instances box-init handed it).
	if !final {
		waitProcessGone(l.rec.ShimPid, 10*time.Second)
	}
	st, err := shim.ReadStatus(l.dir)
	rec := &l.rec
	rec.Ended = time.Now().UTC()
	switch {
	case err != nil && startErr != nil:
		rec.State = api.StateFailed
		rec.Error = &api.Error{Code: api.CodeBoxSetupFailed, Message: "start box shim: " + startErr.Error()}
		rec.Settled = false
	case err != nil:
		rec.State = api.StateLost
		rec.Error = &api.Error{Code: "shim_lost", Message: "the box's shim ended without a status: " + err.Error()}
		rec.Settled = false
	case st.Error != nil && !st.Execd:
		rec.State = api.StateFailed
		rec.Error = &api.Error{Code: st.Error.Code, Message: st.Error.Message}
		rec.Settled = st.Settled
	default:
		rec.State = api.StateExited
		rec.ExitCode = st.ExitCode
		rec.Settled = st.Settled
		if !st.Ended.IsZero() {
			rec.Ended = st.Ended
		}
	}
	if !rec.Settled {
		d.log.Error("box did not settle: processes of the box may remain", "launch", rec.ID)
	}
	// Brokers end first (the integrity watch's exit check, placeholders released, the session
	// ended), so that a launch recorded as ended has left nothing behind. Once: a launch
	// settled again (its outcome's record failed, or a daemon ended before it) had its check
	// at exit run a second time against the launch's snapshot, which took what the user made
	// on the host since for the launch's and moved it into the proposed changes (review 30).
	t := time.Now()
	ended := filepath.Join(l.dir, launchdir.BrokersEndedFile)
	if _, err := os.Lstat(ended); err != nil {
		d.endBrokers(rec.ID)
		if err := os.WriteFile(ended, nil, 0o600); err != nil {
			d.log.Warn("record the end of the launch's brokers", "launch", rec.ID, "err", err)
		}
	} else {
		d.records.End(rec.ID)
	}
	rec.Stages = append(rec.Stages, api.Stage{Name: stageEndBrokers, Duration: time.Since(t)})
	t = time.Now()
	switch {
	case final && top != nil:
		if !top.Wait(10 * time.Second) {
			d.log.Error("the box's top process has not exited 10 s after its end", "launch", rec.ID, "pid", rec.BoxPid)
		}
	case final:
		waitProcessGone(l.rec.ShimPid, 10*time.Second)
	}
	rec.Stages = append(rec.Stages, api.Stage{Name: stageTopExit, Duration: time.Since(t)})
	// The launch's end is settled: nothing of the box runs, its init included (no process of
	// its PID namespace is left when agentbox run returns: e2e TestTreeCleanup), and the check
	// at exit is done. Its client is answered now (api.WaitEnded), while the box's overlay
	// work folders go and the outcome is committed. A daemon that ends in between loses
	// nothing: the store still has the launch running and its directory still holds the
	// shim's status.json, so the next daemon settles it again from that (readopt).
	d.mu.Lock()
	l.final = new(*rec)
	d.mu.Unlock()
	l.markEnded()
	if d.opts.afterEnded != nil {
		d.opts.afterEnded(rec.ID)
	}
	l.saving.Wait()
	// The box's overlays are gone with its top process: its work folders can go.
	t = time.Now()
	d.removeLaunchWork(rec.ID, rec.Workspace)
	// The record committed holds that stage too; what was answered (l.final) stays as it was.
	committed := *rec
	committed.Stages = append(slices.Clone(rec.Stages), api.Stage{Name: stageWorkRemoval, Duration: time.Since(t)})
	// A record that fails keeps the launch's directory: the store still has the launch
	// running, and the next daemon settles it from the status its shim left there (readopt).
	if d.record(&committed, l.dir) {
		if err := launch.RemoveDir(l.dir); err != nil {
			d.log.Warn("remove launch dir", "dir", l.dir, "err", err)
		}
	}
	d.mu.Lock()
	delete(d.launches, rec.ID)
	d.mu.Unlock()
	exit := "-"
	if rec.ExitCode != nil {
		exit = strconv.Itoa(*rec.ExitCode)
	} else if rec.Error != nil {
		exit = rec.Error.Code
	}
	d.log.Info("launch ended", "id", rec.ID, "state", rec.State, "exit", exit, "settled", rec.Settled)
}

// markEnded closes l.ended once (nil-safe for a launch re-adopted without one).
func (l *liveLaunch) markEnded() {
	l.endOnce.Do(func() {
		if l.ended != nil {
			close(l.ended)
		}
	})
}

// record writes a launch's final state; a failure is logged (the box is already gone) and
// answered false.
func (d *Daemon) record(rec *api.Launch, dir string) bool {
	if err := d.store.Finish(context.Background(), toStore(rec, dir)); err != nil {
		d.log.Error("record launch outcome", "launch", rec.ID, "err", err)
		return false
	}
	return true
}

// readopt takes over the launches a previous daemon left running: a shim still alive (same pid
// and process start time) is watched again; one that is gone is settled from its status file.
func (d *Daemon) readopt(ctx context.Context) {
	running, err := d.store.Running(ctx)
	if err != nil {
		d.log.Error("list launches to re-adopt", "err", err)
		return
	}
	for _, sl := range running {
		rec := fromStore(sl)
		l := &liveLaunch{rec: rec, dir: sl.LaunchDir, done: make(chan struct{}), ended: make(chan struct{})}
		alive := sl.ShimPid != 0 && proc.Same(sl.ShimPid, sl.ShimStartTime)
		if !alive {
			// A daemon killed between starting a shim and recording it leaves a launch without
			// its shim's pid: ask the launch directory's socket whether a shim runs there, and
			// record it rather than leave its box unsupervised.
			if st, err := shim.Query(sl.LaunchDir); err == nil && st.ShimPid > 0 {
				if start, err := proc.StartTime(st.ShimPid); err == nil {
					if err := d.store.SetShim(ctx, rec.ID, st.ShimPid, start); err != nil {
						d.log.Error("record the shim of a re-adopted launch", "launch", rec.ID, "err", err)
					}
					l.rec.ShimPid, rec.ShimPid = st.ShimPid, st.ShimPid
					alive = true
				}
			}
		}
		d.mu.Lock()
		d.launches[rec.ID] = l
		d.mu.Unlock()
		d.wg.Add(1)
		if alive {
			d.log.Info("re-adopting box", "launch", rec.ID, "shim", sl.ShimPid)
			home, _ := os.UserHomeDir()
			d.mu.Lock()
			cfg := d.cfg.Config
			d.mu.Unlock()
			d.resumeBrokers(ctx, &broker.Launch{ID: rec.ID, RunDir: filepath.Join(sl.LaunchDir, launchdir.RunDir), Workspace: rec.Workspace,
				Home: home, Profile: rec.Profile, Config: cfg})
			go d.supervise(l)
		} else {
			d.log.Info("settling box that ended while no daemon ran", "launch", rec.ID)
			settling := d.beginSettle() // (readopt runs before the daemon serves: true)
			go func() {
				defer d.wg.Done()
				defer close(l.done)
				defer l.markEnded()
				if !settling {
					return
				}
				defer d.settling.Done()
				l.rec.ShimPid = 0
				d.settle(ctx, l, nil, false, nil)
			}()
		}
	}
	known := func(id string) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		_, ok := d.launches[id]
		return ok
	}
	if d.integrity != nil {
		d.integrity.sweep(known)
	}
	if err := sweepLaunchWork(d.stateDir, known); err != nil {
		d.log.Warn("box caches: remove the overlay work folders of ended launches", "err", err)
	}
	d.volatile.recover()
}

// stopWatchers waits briefly for supervision goroutines; they end with their shims, which the
// daemon's exit does not affect.
func (d *Daemon) stopWatchers() {
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(100 * time.Millisecond):
	}
}

// waitProcessGone waits until pid no longer exists (0 returns at once), at most max: on a pidfd
// of the process, which the kernel makes readable at its exit (proc.WaitEnded), so that the
// launch's end follows the shim's exit at once rather than at the next of polls 5 ms apart.
func waitProcessGone(pid int, max time.Duration) {
	if pid <= 0 {
		return
	}
	proc.WaitEnded(pid, max)
}
