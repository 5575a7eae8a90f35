package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/changes"
	"github.com/agentbox/agentbox/internal/store"
)

// serveChanges lists a launch's proposed changes, each as a diff against the host's path now.
func (d *Daemon) serveChanges(w http.ResponseWriter, r *http.Request) error {
	l, _, err := d.find(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	out, err := d.proposed(r.Context(), l)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// proposedCount counts launch id's proposed changes, and what its box created after they were
// full, without reading them; nil (logged) when they cannot be listed.
func (d *Daemon) proposedCount(id string) *api.ProposedCount {
	dir := d.changesDir(id)
	cs, err := changes.Index(dir)
	if err != nil {
		d.log.Warn("count proposed changes", "launch", id, "err", err)
		return nil
	}
	dropped, err := changes.ReadDropped(dir)
	if err != nil {
		d.log.Warn("count proposed changes", "launch", id, "err", err)
		return nil
	}
	ign, err := changes.ReadIgnoredDropped(dir)
	if err != nil {
		d.log.Warn("count proposed changes", "launch", id, "err", err)
		return nil
	}
	n := &api.ProposedCount{Changes: len(cs), Dropped: dropped.Count, IgnoredDropped: ign.Count}
	for _, c := range cs {
		if c.Ignored {
			n.Ignored++
		}
	}
	return n
}

// proposed reads launch l's proposed changes, one at a time (their contents are never all in
// memory), until ctx is done. Each diff is bounded (changes.Diff), and so is the answer: past
// api.MaxChangesAnswer bytes of diffs a change is listed with its size and hash instead.
func (d *Daemon) proposed(ctx context.Context, l *api.Launch) (*api.Changes, error) {
	dir := d.changesDir(l.ID)
	cs, err := changes.Index(dir)
	if err != nil {
		return nil, err
	}
	dropped, err := changes.ReadDropped(dir)
	if err != nil {
		return nil, err
	}
	ign, err := changes.ReadIgnoredDropped(dir)
	if err != nil {
		return nil, err
	}
	out := &api.Changes{LaunchID: l.ID, Workspace: l.Workspace, Changes: []api.ProposedChange{},
		Dropped: dropped.Count, DroppedPaths: dropped.Paths, IgnoredDropped: ign.Count, IgnoredDroppedPaths: ign.Paths,
		Running: l.State == api.StateRunning || l.State == api.StateStarting}
	size := 0
	for _, c := range cs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := changes.Read(dir, &c); err != nil {
			return nil, err
		}
		path := filepath.Join(l.Workspace, c.Path)
		host, exists := hostContent(path)
		conflict := exists || changes.WayBlocked(l.Workspace, c.Path)
		if c.Modifies {
			fi, err := os.Lstat(path)
			conflict = err != nil || !fi.Mode().IsRegular() || !bytes.Equal(host, c.Base)
		}
		pc := api.ProposedChange{Path: c.Path, Kind: c.Kind, Modifies: c.Modifies,
			Diff: changes.Diff(c, host), HostExists: exists, Conflict: conflict, Truncated: c.Truncated, Ignored: c.Ignored, SHA256: c.SHA256, Hidden: c.Hidden}
		pc.Stored = changes.StorePath(dir, c.Path)
		pc.Partial = !changes.ShownWhole(c, host)
		if b, err := json.Marshal(pc); err != nil || size+len(b) > api.MaxChangesAnswer {
			pc.NotShown, pc.Partial = true, true
			pc.Diff = fmt.Sprintf("(not shown: the answer holds at most %d bytes of diffs; the box's file is %s, kept in %s)\n",
				api.MaxChangesAnswer, changes.Summary(c.Content), dir)
		} else {
			size += len(b)
		}
		out.Changes = append(out.Changes, pc)
	}
	return out, nil
}

// hostContent returns what the host has at path (a symlink as its target; a file's first
// changes.MaxFile+1 bytes, enough to tell it from any change's), and whether anything is there.
func hostContent(path string) ([]byte, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, false
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		t, _ := os.Readlink(path)
		return []byte("symlink to " + t + "\n"), true
	}
	if !fi.Mode().IsRegular() {
		return []byte("(a " + fi.Mode().Type().String() + ")\n"), true
	}
	b := []byte{}
	if f, err := os.Open(path); err == nil {
		var buf bytes.Buffer
		buf.ReadFrom(io.LimitReader(f, changes.MaxFile+1))
		f.Close()
		b = append(b, buf.Bytes()...)
	}
	return b, true
}

// removeEmptyChanges removes a launch's proposed-changes folder dir when it holds no change and
// no record of changes not kept.
func removeEmptyChanges(dir string) {
	cs, err := changes.Index(dir)
	if err != nil || len(cs) > 0 {
		return
	}
	d, err := changes.ReadDropped(dir)
	ign, ierr := changes.ReadIgnoredDropped(dir)
	if err == nil && ierr == nil && d.Count == 0 && ign.Count == 0 {
		os.RemoveAll(dir)
	}
}

// serveApply applies a launch's proposed changes (all, or the paths asked for) on the host,
// once no box runs on its workspace: a box's guard would take the applied file for its own. A
// change whose path the host has meanwhile (or, for a change to a protected file, whose file
// the host changed meanwhile) is refused with both shown (CodeChangeConflict); the ones
// applied before it stay applied.
func (d *Daemon) serveApply(w http.ResponseWriter, r *http.Request) error {
	var req api.ApplyRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	l, _, err := d.find(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	// A launch whose end is settled (its guard's last passes and the check at exit done) and
	// whose outcome is not committed yet runs no more: withOutcome.
	outcomes := d.endedOutcomes()
	running, err := d.store.ListLaunches(r.Context(), store.Filter{})
	if err != nil {
		return err
	}
	for _, sl := range running {
		o := withOutcome(new(fromStore(sl)), outcomes)
		if o.Workspace == l.Workspace && (o.State == api.StateRunning || o.State == api.StateStarting) {
			return &api.Error{Code: api.CodeChangeConflict, Message: fmt.Sprintf("launch %s runs on %s", o.ID[:12], l.Workspace),
				Hint: "apply once no box runs on the workspace (its guard would take the applied file for the box's)"}
		}
	}
	paths := req.Paths
	if len(paths) == 0 {
		// All of them only when `agentbox changes` shows every one whole, by the same answer
		// (proposed): one it showed in part (binary, longer than a diff compares, past the
		// answer's bound) is applied only by its path, after the user read it in the store;
		// nothing is applied otherwise (review 32, B F5, D F1 F6). A file left in a git-ignored
		// place (moved out at exit: build output, the host's own files of a folder renamed
		// meanwhile) is shown by its hash whatever its kind, and apply puts back those exact
		// bytes: it is no configuration to read, and does not hold the others back (D F5).
		cs, err := d.proposed(r.Context(), l)
		if err != nil {
			return err
		}
		var partial []string
		for _, c := range cs.Changes {
			if c.Partial && !c.Ignored {
				partial = append(partial, c.Path)
			}
			paths = append(paths, c.Path)
		}
		if len(partial) > 0 {
			return &api.Error{Code: api.CodeChangeConflict,
				Message: fmt.Sprintf("launch %s proposes changes that agentbox changes does not show whole (a file with a NUL byte, longer than a diff compares, or past the answer's bound): %s; nothing was applied", l.ID[:12], strings.Join(partial, ", ")),
				Hint:    "read each in the launch's store (agentbox changes " + l.ID[:12] + " names where it is kept), then apply it by its path: agentbox apply " + l.ID[:12] + " PATH"}
		}
	}
	res := api.ApplyResult{Applied: []string{}}
	for _, p := range paths {
		err := changes.Apply(d.changesDir(l.ID), l.Workspace, p)
		switch {
		case errors.Is(err, changes.ErrConflict):
			return &api.Error{Code: api.CodeChangeConflict, Message: fmt.Sprintf("%v (applied before it: %v)", err, res.Applied),
				Hint: "`agentbox changes " + l.ID[:12] + "` shows the host's file and the box's; resolve by hand"}
		case errors.Is(err, changes.ErrUnknown):
			return &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("%v (applied before it: %v)", err, res.Applied),
				Hint: "`agentbox changes " + l.ID[:12] + "` lists the paths"}
		case err != nil:
			return fmt.Errorf("apply %s: %w (applied before it: %v)", p, err, res.Applied)
		}
		d.log.Info("proposed change applied", "launch", l.ID, "path", p)
		res.Applied = append(res.Applied, p)
	}
	removeEmptyChanges(d.changesDir(l.ID))
	writeJSON(w, http.StatusOK, res)
	return nil
}
