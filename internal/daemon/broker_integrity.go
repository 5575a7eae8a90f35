package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/broker"
	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/integrity"
	"github.com/agentbox/agentbox/internal/launchdir"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/store"
)

// The integrity broker protects each launch's executable configuration (docs/integrity.md):
// before the box spawns it resolves the protected paths, creates the placeholders absent ones
// need, snapshots the integrity roots and adds the read-only binds to the plan; while the box
// runs it verifies periodically and on inotify events; when the box has ended (or never
// started) it verifies once more and removes the placeholders. Transitions are logged and
// recorded in the store. It is alert-first: nothing is restored or blocked by the watch, but
// new or changed executable git configuration and hooks outside the pinned paths are moved
// aside (docs/integrity.md, "Git's execution surface").

type integrityBroker struct {
	integrityDeps
	reg     *integrity.Registry
	watches broker.Launches[*integrityWatch]
	// saves are the launches' first saves of their state, under way (Prepare).
	saves broker.Launches[*pendingSave]
}

// pendingSave is a launch's first save of its integrity state, written (and synced to disk)
// on its own goroutine while the launch goes on: err is set once done is closed.
type pendingSave struct {
	done chan struct{}
	err  error
}

// integrityDeps is what the integrity broker is built from.
type integrityDeps struct {
	// RuntimeDir holds the launch directories, where each launch's state is kept host-side.
	RuntimeDir string
	// StateDir holds the placeholder registry, the staged copies of protected files and the
	// launches' proposed changes.
	StateDir string
	// Helper is the box helper shims start from ("" when from agentbox itself): pinned when
	// the workspace holds it.
	Helper string
	// Drift records the watch's transitions; nil records none.
	Drift interface {
		AddDrift(ctx context.Context, id string, e api.DriftEvent) error
	}
	Log *slog.Logger
	// beforeSave, in tests, runs before the write of a launch's first save of its state.
	beforeSave func(id string)
}

func newIntegrityBroker(deps integrityDeps) *integrityBroker {
	return &integrityBroker{integrityDeps: deps, reg: &integrity.Registry{Path: filepath.Join(deps.StateDir, "placeholders.json")}}
}

type integrityWatch struct {
	w      *integrity.Watcher
	cancel context.CancelFunc
	done   chan struct{}
}

// integrityState is where a launch's integrity state is kept: the launch directory, host-side
// only (not the run directory the box sees).
func (b *integrityBroker) statePath(id string) string {
	return filepath.Join(launchdir.Dir(b.RuntimeDir, id), launchdir.IntegrityFile)
}

func (*integrityBroker) Name() string { return "integrity" }

// independent: the snapshot needs nothing from the other brokers.
func (b *integrityBroker) Independent() {}

func (b *integrityBroker) Prepare(ctx context.Context, bl *broker.Launch, c *plan.Contributions) (err error) {
	// Resolved under the registry's lock, with the placeholders of other launches on the
	// workspace taken for what they are (shared, held while this box runs too), never for the
	// user's files.
	// Every box pins the union of all harnesses' workspace configuration, whatever its program.
	// agentbox's own binaries, when the workspace holds them, are pinned too (ownBinaryPins).
	exe, _ := os.Executable()
	own, ownExtra := ownBinaryPins(bl.Workspace, exe, b.Helper)
	lay, err := b.reg.Prepare(bl.ID, bl.Workspace, append(workspaceConfigPins(bl.Config), ownExtra...))
	if err != nil {
		b.release(bl.ID)
		return err
	}
	// The protected files that exist are staged: the box writes a copy of each, kept as a
	// proposed change at exit (changes.Collect); agentbox's own binaries stay read-only.
	if lay.Protected, err = changes.Stage(stagedDir(b.StateDir, bl.ID), lay.Protected); err != nil {
		b.release(bl.ID)
		return err // the launch stage names the broker
	}
	lay.Protected = append(lay.Protected, own...)
	// The workspace scan looks for every program's workspace configuration in subfolders too,
	// the programs of the user's configuration included (pinned at the top above), besides
	// what the resolver found (the later matches of a lefthook extends pattern).
	lay.Config = append(lay.Config, integrity.ProfileConfigFiles(profileSet(bl.Config))...)
	// Instruction files stay writable (unless protect.instructions is readonly): watched only,
	// so that what the launch changed in them is recorded and listed at exit.
	lay.Track(workspaceInstructions(bl.Config, bl.Workspace)...)
	// The profile's ro and deny home entries that are absent, beneath a rw entry, are held by
	// placeholders while the box runs: the box binds or masks them and cannot create them.
	homeHeld, err := b.reg.Hold(bl.ID, homePlaceholders(bl.Config, bl.Profile, bl.Home))
	if err != nil {
		b.release(bl.ID)
		return fmt.Errorf("integrity: %w", err)
	}
	// The profile's protected home entries (bound read-only by its wiring) are watched too;
	// they lie outside the workspace and get no placeholder (preCreate made them).
	lay.Watch(homeWatched(bl.Config, bl.Profile, bl.Home)...)
	for _, n := range lay.Notes {
		b.Log.Warn("integrity: protected path not pinned", "launch", bl.ID, "note", n)
	}
	st := integrity.Snapshot(lay, integrity.Limits{})
	// A tracked file whose change the host's git views do not show is put back at exit and
	// the launch's version kept among its proposed changes (docs/integrity.md, "Tracked edits
	// git does not show").
	st.Changes = changesDir(b.StateDir, bl.ID)
	// The state is what a restarted daemon resumes the watch and the check at exit from. Its
	// write and the two syncs to disk (the file's, its folder's: a few milliseconds, tens on a
	// busy disk) run beside the rest of the launch; the launch's record waits for them
	// (awaitSaved), and the program cannot start before it is recorded. Later saves wait for
	// this one (saveState), so that none is overtaken by it.
	write, err := st.Saver()
	if err != nil {
		b.release(bl.ID)
		return err
	}
	ps := &pendingSave{done: make(chan struct{})}
	b.saves.Put(bl.ID, ps)
	defer func() {
		if err != nil {
			// A prepare that failed gets no End: its save is done before the launch's
			// directory goes (the launch's rollback).
			b.awaitSaved(bl.ID)
			b.saves.Take(bl.ID)
		}
	}()
	go func(id string) {
		defer close(ps.done)
		if b.beforeSave != nil {
			b.beforeSave(id)
		}
		ps.err = write(b.statePath(id))
	}(bl.ID)
	// The folders of the git-ignored places there now are recorded beside the box, for the
	// check at exit (integrity.State.IgnoredChanged: a folder renamed in the launch), and saved
	// beside the state for a daemon restarted meanwhile (Resume).
	id := bl.ID
	st.RecordFolders(b.foldersPath(id), func(err error) {
		if err != nil {
			b.Log.Error("integrity: save the record of the ignored folders", "launch", id, "err", err)
		}
	})
	// Absent protected paths get no placeholder: the engine moves what the box creates at one
	// into the launch's proposed changes (changes.Guard); the guards are kept beside the state
	// for the pass at exit.
	if len(lay.Guards) > 0 {
		if err := saveGuards(b.guardsPath(bl.ID), lay.Guards); err != nil {
			b.release(bl.ID)
			return err
		}
		c.Guards = lay.Guards
	}
	// A protected path that exists is guarded as well should the host remove it while the box
	// runs (the engine records it in the store, changes.Added): the store is the box's always.
	if len(lay.Guards) > 0 || len(lay.Protected) > 0 {
		c.ChangesDir = changesDir(b.StateDir, bl.ID)
	}
	c.Mounts = append(c.Mounts, plan.ProtectMounts(lay.Protected)...)
	b.Log.Info("integrity snapshot", "launch", bl.ID, "roots", len(st.Roots), "pinned", len(lay.Protected),
		"guarded", len(lay.Guards), "homePlaceholders", len(homeHeld), "execConfig", len(st.Exec))
	// The watch's inotify instance and watches are made now, before the box exists, and a
	// launch without them is refused: a box cannot take them from it (issue 21, finding 9).
	if err := b.start(bl.ID, st, bl.Config.Integrity.Interval.Duration(), true); err != nil {
		b.release(bl.ID)
		return err // the launch stage names the broker
	}
	return nil
}

func (b *integrityBroker) Resume(ctx context.Context, bl *broker.Launch) error {
	st, err := b.loadState(bl.ID)
	if err != nil {
		return err
	}
	// A repository its box may be making is a box's for the launches started beside it.
	if st.NoRepository {
		b.reg.HoldBoxRepo(bl.ID, st.Workspace)
	}
	// The box runs already: without an inotify instance the periodic check goes on (logged).
	b.start(bl.ID, st, bl.Config.Integrity.Interval.Duration(), false)
	// What changed while no daemon watched is reported now.
	b.watcher(bl.ID).Verify(integrity.SourcePeriodic, false)
	return nil
}

// awaitSaved waits for launch id's first save of its state (Prepare) and returns its error;
// nil when there is none under way (done already, or never started).
func (b *integrityBroker) awaitSaved(id string) error {
	ps, ok := b.saves.Get(id)
	if !ok {
		return nil
	}
	<-ps.done
	return ps.err
}

// saveState saves launch id's state to its place once its first save is done.
func (b *integrityBroker) saveState(id string, st *integrity.State) error {
	b.awaitSaved(id) // (its error was the launch's: a later save tries again)
	return st.Save(b.statePath(id))
}

func (b *integrityBroker) End(id string) {
	// The first save's goroutine is done before the launch's files go.
	b.awaitSaved(id)
	b.saves.Take(id)
	var w *integrity.Watcher
	if iw, ok := b.watches.Take(id); ok {
		iw.cancel()
		<-iw.done
		w = iw.w
	} else if st, err := b.loadState(id); err == nil {
		// Settled by a daemon that did not prepare or resume it (re-adoption of an ended box).
		w = b.newWatcher(id, st, 0)
	} else if !errors.Is(err, os.ErrNotExist) {
		b.Log.Error("integrity: load state for the check at exit", "launch", id, "err", err)
	}
	workspace := ""
	if w != nil {
		workspace = w.State.Workspace
	}
	// What a box created at a guarded path and its engine did not move out (an engine without a
	// guard, a box-init that was killed) is moved out now, before the launch is recorded as
	// ended; first, so that collecting a staged copy finds what the box created at its path
	// after the host removed the file.
	b.sweepGuards(id, workspace)
	// What the box wrote in the staged copies of protected files is kept as proposed changes,
	// before the launch is recorded as ended.
	keepStaged := b.collectStaged(id, workspace)
	if w != nil {
		w.Verify(integrity.SourceExit, true)
		b.takeIgnored(id, w.State)
		b.sayUntracked(id, w.State)
		if w.State.IndexesLocked() {
			// An index written beside a git's lock is checked again once the lock has gone
			// (bounded: integrity.IndexRecheckWait).
			go w.SettleIndexes(context.Background())
		}
	}
	b.releaseHeld(id, keepStaged)
}

// takeIgnored moves the files launch id left in git-ignored places of its workspace (created
// or changed since the snapshot: integrity.State.IgnoredChanged) into its proposed changes
// (changes.TakeIgnored), before the launch is recorded as ended: no git status shows them,
// and the host's tools would run them (docs/integrity.md, "Files a box leaves in git-ignored
// places"), and so do the runnable files it left in the folders the top's allowed .envrc puts
// on PATH (PATH_add bin: "Scripts a hook runs by their path"). What could not be looked at, removed past the bounds, or moved is a drift alert.
func (b *integrityBroker) takeIgnored(id string, st *integrity.State) {
	alert := func(path, detail string) {
		ev := api.DriftEvent{Kind: "modified", Path: path, Detail: detail, Source: api.DriftSourceIgnored, Alert: true}
		if err := b.Drift.AddDrift(context.Background(), id, ev); err != nil {
			b.Log.Error("integrity: record drift", "launch", id, "err", err)
		}
	}
	start := time.Now()
	found := st.IgnoredChanged(context.Background())
	for _, n := range found.NotChecked {
		alert(st.Workspace, "files left in git-ignored places not checked: "+n)
	}
	// A file git would have waited on, moved aside first, and a git that failed (the walk in
	// Go took every untracked file the launch left there instead) are said: the check did not
	// go as it should (review 18, F3).
	for _, n := range found.Aside {
		alert(st.Workspace, "before the check at exit ran git: "+n)
	}
	for _, n := range found.Failed {
		alert(st.Workspace, "the check at exit of the files left in git-ignored places failed ("+n+"): every untracked file the launch created or changed there was moved out of the workspace instead (agentbox changes lists them)")
	}
	if len(found.Files) == 0 {
		return
	}
	res, err := changes.TakeIgnored(changesDir(b.StateDir, id), st.Workspace, found.Files, st.Started)
	if err != nil {
		b.Log.Error("integrity: move the files left in git-ignored places into the proposed changes", "launch", id, "err", err)
	}
	b.Log.Warn("integrity: moved the files the launch left in git-ignored places into its proposed changes", "launch", id,
		"kept", len(res.Kept), "bytes", res.KeptBytes, "removed", res.Dropped.Count, "took", time.Since(start))
	if res.Dropped.Count > 0 {
		alert(st.Workspace, fmt.Sprintf("%d files the launch left in git-ignored places were removed from the workspace, not kept: past the bound of %d files or %d bytes of proposed changes (the first: %s)",
			res.Dropped.Count, changes.MaxIgnoredFiles, changes.MaxIgnoredBytes, strings.Join(res.Dropped.Paths, ", ")))
	}
	if len(res.Left) > 0 {
		alert(st.Workspace, fmt.Sprintf("%d files in git-ignored places, unchanged since before the launch but in a folder made or renamed in it, were left in place past the bound of %d files or %d bytes of proposed changes (the first: %s): the host's own files are never removed; check them before the host's tools run them",
			len(res.Left), changes.MaxIgnoredFiles, changes.MaxIgnoredBytes, strings.Join(res.Left[:min(len(res.Left), 5)], ", ")))
	}
	if len(res.Renamed) > 0 {
		alert(st.Workspace, fmt.Sprintf("%d files in git-ignored places, there before the launch but changed in it (by the box, or by you on the host meanwhile), in a folder made or renamed in it, were renamed beside themselves past the bound of %d files or %d bytes of proposed changes (the first: %s): compare each with what you expect, and rename it back if it is yours",
			len(res.Renamed), changes.MaxIgnoredFiles, changes.MaxIgnoredBytes, strings.Join(res.Renamed[:min(len(res.Renamed), 5)], ", ")))
	}
	if len(res.Moved) > 0 {
		b.Log.Warn("integrity: moved files unchanged since before the launch, in a folder made or renamed in it, into its proposed changes past the bound", "launch", id, "moved", len(res.Moved))
	}
	for _, f := range res.Failed {
		alert(filepath.Join(st.Workspace, f.Path), fmt.Sprintf("the launch left it in a git-ignored place, and it could not be moved out of the workspace: %v; remove it before the host's tools run it", f.Err))
	}
}

// sayUntracked records, for the end of the run, the untracked files launch id created or
// changed that the user's git status does not name (integrity.State.UntrackedUnlisted): they
// stay, as every untracked file does, but the user's review is told their names
// (docs/integrity.md, "Untracked files git status does not name").
func (b *integrityBroker) sayUntracked(id string, st *integrity.State) {
	found, err := st.UntrackedUnlisted(context.Background())
	if err != nil {
		b.Log.Error("integrity: list the untracked files git status does not name", "launch", id, "err", err)
		ev := api.DriftEvent{Kind: "modified", Path: st.Workspace, Source: api.DriftSourceIgnored, Alert: true,
			Detail: fmt.Sprintf("untracked files git status does not name not checked: %v", err)}
		if err := b.Drift.AddDrift(context.Background(), id, ev); err != nil {
			b.Log.Error("integrity: record drift", "launch", id, "err", err)
		}
		return
	}
	if len(found.Files) == 0 {
		return
	}
	named := found.Files[:min(len(found.Files), api.UntrackedNamed)]
	detail := fmt.Sprintf("%d files: %s", len(found.Files), strings.Join(named, ", "))
	if len(found.Files) > len(named) {
		detail += ", …"
	}
	ev := api.DriftEvent{Kind: "modified", Path: st.Workspace, Detail: detail + " (" + found.Why + ")", Source: api.DriftSourceUntracked}
	if err := b.Drift.AddDrift(context.Background(), id, ev); err != nil {
		b.Log.Error("integrity: record drift", "launch", id, "err", err)
	}
}

// collectStaged keeps what launch id's box changed in its staged copies of protected files
// as proposed changes, and removes the copies. A copy that could not be collected is left in
// the staged folder and recorded as a drift alert naming the file, the reason and where the
// copy is, as is one the box made larger than changes.MaxFile (not kept); it reports whether
// copies were left. ws is the workspace the paths are recorded in ("" records them relative).
func (b *integrityBroker) collectStaged(id string, ws string) (left bool) {
	dir := stagedDir(b.StateDir, id)
	res, err := changes.Collect(dir, changesDir(b.StateDir, id))
	for _, rel := range res.Kept {
		b.Log.Warn("integrity: kept what the box wrote to a protected file as a proposed change", "launch", id, "path", rel)
	}
	alert := func(rel, detail string) {
		ev := api.DriftEvent{Kind: "modified", Path: filepath.Join(ws, rel), Detail: detail, Source: api.DriftSourceCollect, Alert: true}
		if err := b.Drift.AddDrift(context.Background(), id, ev); err != nil {
			b.Log.Error("integrity: record drift", "launch", id, "err", err)
		}
	}
	for _, rel := range res.Truncated {
		b.Log.Warn("integrity: the box filled its copy of a protected file to the bound; kept truncated", "launch", id, "path", rel, "bound", changes.MaxFile)
	}
	for _, rel := range res.TooLarge {
		b.Log.Warn("integrity: the box wrote more than the proposed-change bound to a protected file; not kept", "launch", id, "path", rel, "bound", changes.MaxFile)
		alert(rel, fmt.Sprintf("the box wrote more than %d bytes to it (the host's file is untouched)", changes.MaxFile))
	}
	for _, f := range res.Failed {
		b.Log.Error("integrity: collect the staged copy of a protected file", "launch", id, "path", f.Path, "err", f.Err)
		alert(f.Path, fmt.Sprintf("%v; the box's copy is kept in %s", f.Err, filepath.Join(dir, "box", f.Path)))
	}
	if err != nil {
		b.Log.Error("integrity: collect the staged copies of protected files", "launch", id, "err", err)
	}
	return len(res.Failed) > 0 || err != nil
}

// foldersPath is where launch id's record of the folders in git-ignored places is saved
// (integrity.State.RecordFolders), beside its state.
func (b *integrityBroker) foldersPath(id string) string {
	return filepath.Join(launchdir.Dir(b.RuntimeDir, id), launchdir.IntegrityFoldersFile)
}

// loadState reads launch id's integrity state as Prepare saved it, with the record of the
// folders in git-ignored places when it was saved (a daemon stopped before leaves none: logged,
// and the check at exit takes each folder whose ctime is in the launch whole).
func (b *integrityBroker) loadState(id string) (*integrity.State, error) {
	st, err := integrity.Load(b.statePath(id))
	if err != nil {
		return nil, err
	}
	if err := st.LoadFolders(b.foldersPath(id)); err != nil {
		b.Log.Warn("integrity: no record of the ignored folders at the launch's start; the check at exit takes each folder changed in the launch whole", "launch", id, "err", err)
	}
	return st, nil
}

func (b *integrityBroker) guardsPath(id string) string {
	return filepath.Join(launchdir.Dir(b.RuntimeDir, id), launchdir.GuardsFile)
}

// sweepGuards makes one guard pass over launch id's guarded paths: those guarded from the start
// and those its engine guarded after the host removed them (changes.Added), which must lie
// beneath the workspace ws.
func (b *integrityBroker) sweepGuards(id, ws string) {
	defer b.removeEmptyChanges(id)
	gs, err := loadGuards(b.guardsPath(id))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		b.Log.Error("integrity: load guarded paths for the pass at exit", "launch", id, "err", err)
	}
	added, err := changes.Added(changesDir(b.StateDir, id))
	if err != nil {
		b.Log.Error("integrity: load the paths guarded while the box ran", "launch", id, "err", err)
	}
	for _, g := range added {
		if ws == "" || g.Beneath != ws || !plan.Within(g.Path, ws) {
			b.Log.Error("integrity: a path guarded while the box ran is not beneath its workspace; not swept", "launch", id, "path", g.Path, "workspace", ws)
			continue
		}
		b.Log.Warn("integrity: a protected path was removed on the host while the box ran; guarded since", "launch", id, "path", g.Path)
		gs = append(gs, g)
	}
	if len(gs) == 0 {
		return
	}
	g, err := changes.Open(changesDir(b.StateDir, id), gs, false)
	if err != nil {
		b.Log.Error("integrity: guard pass at exit", "launch", id, "err", err)
		return
	}
	g.Captured = func(rel string) {
		b.Log.Warn("integrity: moved what the box created at a protected path into its proposed changes", "launch", id, "path", rel)
	}
	if err := g.Close(); err != nil {
		b.Log.Error("integrity: guard pass at exit", "launch", id, "err", err)
	}
}

// removeEmptyChanges removes launch id's proposed-changes folder when the box proposed nothing.
func (b *integrityBroker) removeEmptyChanges(id string) {
	removeEmptyChanges(changesDir(b.StateDir, id))
}

func saveGuards(path string, gs []plan.Guard) error {
	data, err := json.Marshal(gs)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("guarded paths: %w", err)
	}
	return nil
}

func loadGuards(path string) ([]plan.Guard, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var gs []plan.Guard
	if err := json.Unmarshal(data, &gs); err != nil {
		return nil, fmt.Errorf("guarded paths %s: %w", path, err)
	}
	return gs, nil
}

// sweep releases the placeholders of launches the daemon does not know: a daemon killed after
// a launch's placeholders were made and before the launch was recorded leaves them held by a
// launch nothing will ever settle. Call it once the running launches are re-adopted.
func (b *integrityBroker) sweep(known func(id string) bool) {
	holders, err := b.reg.Holders()
	if err != nil {
		b.Log.Error("integrity: list placeholder holders", "err", err)
		return
	}
	for _, id := range holders {
		if !known(id) {
			b.Log.Info("integrity: releasing the placeholders of an unrecorded launch", "launch", id)
			b.release(id)
		}
	}
}

// release removes the placeholders launch id held, unless another box still holds them, and
// its staged copies.
func (b *integrityBroker) release(id string) { b.releaseHeld(id, false) }

// releaseHeld is release, keeping the staged copies when keepStaged is set: those a collect at
// exit could not collect, the only record of what the box wrote to them.
func (b *integrityBroker) releaseHeld(id string, keepStaged bool) {
	// Staged copies left by a prepare that failed (end collected them otherwise).
	if !keepStaged {
		if err := os.RemoveAll(stagedDir(b.StateDir, id)); err != nil {
			b.Log.Error("integrity: remove staged copies", "launch", id, "err", err)
		}
	}
	removed, err := b.reg.Release(id)
	if err != nil {
		b.Log.Error("integrity: remove placeholders", "launch", id, "err", err)
	}
	if len(removed) > 0 {
		b.Log.Debug("integrity: placeholders removed", "launch", id, "paths", removed)
	}
}

// ownDepFolders records in launch id's integrity state that the dependency folders paths are
// its box's own (overlays: the box never writes the host's folders beneath), so that the check
// at exit takes the host's changes there for the host's. A launch without a watch (none
// prepared) records nothing; a state that cannot be saved keeps it in memory, and a daemon
// restarted before the exit check takes those folders for ones the box could write.
func (b *integrityBroker) ownDepFolders(id string, paths []string) {
	iw, ok := b.watches.Get(id)
	if !ok {
		return
	}
	if err := iw.w.OwnDeps(paths, func(st *integrity.State) error { return b.saveState(id, st) }); err != nil {
		b.Log.Error("integrity: save state", "launch", id, "err", err)
	}
}

func (b *integrityBroker) watcher(id string) *integrity.Watcher {
	iw, _ := b.watches.Get(id)
	return iw.w
}

// start starts launch id's watch; with open, its inotify instance and watches are made first
// (integrity.Watcher.Open), and an error is returned, nothing started, when they cannot be.
func (b *integrityBroker) start(id string, st *integrity.State, interval time.Duration, open bool) error {
	w := b.newWatcher(id, st, interval)
	if open {
		if err := w.Open(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	iw := &integrityWatch{w: w, cancel: cancel, done: make(chan struct{})}
	b.watches.Put(id, iw) // (one per launch: Prepare or Resume, never both)
	go func() {
		defer close(iw.done)
		if err := w.Run(ctx); err != nil {
			b.Log.Warn("integrity: file events unavailable; periodic checks go on", "launch", id, "err", err)
		}
	}()
	return nil
}

func (b *integrityBroker) newWatcher(id string, st *integrity.State, interval time.Duration) *integrity.Watcher {
	w := &integrity.Watcher{State: st, Interval: interval}
	w.OnTransition = func(src integrity.Source, t integrity.Transition) {
		level := slog.LevelWarn
		if !t.Alert {
			level = slog.LevelInfo
		}
		b.Log.Log(context.Background(), level, "integrity drift", "launch", id, "kind", t.Kind, "path", t.Path,
			"detail", t.Detail, "source", src, "alert", t.Alert)
		ev := api.DriftEvent{Kind: string(t.Kind), Path: t.Path, Detail: t.Detail, Source: string(src), Alert: t.Alert}
		if b.Drift != nil {
			if err := b.Drift.AddDrift(context.Background(), id, ev); err != nil {
				b.Log.Error("integrity: record drift", "launch", id, "err", err)
			}
		}
	}
	w.OnCoverLost = func(watched int) {
		b.Log.Warn("integrity: file events cover only part of the workspace; from now on each check rescans all of it for executable configuration",
			"launch", id, "watched", watched)
	}
	w.OnCheck = func(c integrity.Check) {
		if len(c.Transitions) > 0 {
			if err := b.saveState(id, st); err != nil && !errors.Is(err, os.ErrNotExist) {
				b.Log.Error("integrity: save state", "launch", id, "err", err)
			}
		}
		switch c.Source {
		case integrity.SourcePeriodic, integrity.SourceExit:
			b.Log.Info(fmt.Sprintf("integrity check (%s)", c.Source), "launch", id, "roots", c.Roots,
				"transitions", len(c.Transitions), "took", c.Took)
		default:
			b.Log.Debug("integrity check", "launch", id, "source", c.Source, "transitions", len(c.Transitions))
		}
	}
	return w
}

// stagedDir is where the staged copies of launch id's protected files are kept while its box
// runs (changes.Stage): in the state directory, on the disk the workspace's files would take.
func stagedDir(stateDir, id string) string {
	return filepath.Join(stateDir, "staged", id)
}

// minStagedAge is how old a launch's folder must be before a prune removes it, whatever the
// prune's cut-off: a launch being prepared has its staged copies before its record exists.
const minStagedAge = time.Hour

// launchFolders are the folders of the state directory that hold a folder per launch, which
// goes with the launch's record: the staged copies a collect at exit could not collect
// (collectStaged leaves them with a drift alert), and the proposed changes (changesDir), which
// `agentbox changes` and `apply` reach only through the launch's record.
var launchFolders = []string{"staged", "changes"}

// pruneLaunchFolders removes the launch folders (launchFolders) that outlived their launch's
// record — launches.retention, or `agentbox launches prune` — so that they go with it. A folder
// is removed when its launch is not recorded (pruned, or never recorded: a daemon stopped while
// preparing it) and it was last changed before before and at least minStagedAge ago; recorded
// says whether a launch is recorded. It returns the folders it removed, and the first error
// (the other folders are still looked at).
func pruneLaunchFolders(stateDir string, before time.Time, recorded func(id string) (bool, error)) ([]string, error) {
	if floor := time.Now().Add(-minStagedAge); floor.Before(before) {
		before = floor
	}
	var removed []string
	var errs []error
	for _, sub := range launchFolders {
		root := filepath.Join(stateDir, sub)
		ents, err := os.ReadDir(root)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sub, err))
			continue
		}
		for _, e := range ents {
			fi, err := e.Info()
			if err != nil || !fi.IsDir() || !fi.ModTime().Before(before) {
				continue
			}
			if rec, err := recorded(e.Name()); err != nil || rec {
				if err != nil {
					errs = append(errs, err)
				}
				continue
			}
			p := filepath.Join(root, e.Name())
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
				continue
			}
			removed = append(removed, p)
		}
	}
	return removed, errors.Join(errs...)
}

// pruneLaunchFolders is pruneLaunchFolders for the daemon's store and state directory.
func (d *Daemon) pruneLaunchFolders(ctx context.Context, before time.Time) {
	removed, err := pruneLaunchFolders(d.stateDir, before, func(id string) (bool, error) {
		_, err := d.db.GetLaunch(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		d.log.Warn("prune the folders of pruned launches", "err", err)
	}
	for _, p := range removed {
		d.log.Info("folder of a pruned launch removed", "launch", filepath.Base(p), "path", p)
	}
}

// changesDir is where launch id's proposed changes are kept (docs/integrity.md): in the state
// directory, so that they outlive the launch and a reboot, until applied or discarded.
func (d *Daemon) changesDir(id string) string { return changesDir(d.stateDir, id) }

func changesDir(stateDir, id string) string { return filepath.Join(stateDir, "changes", id) }
