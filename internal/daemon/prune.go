package daemon

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/agentbox/agentbox/internal/api"
)

// pruneEvery is how often the daemon deletes the records of launches that ended more than
// launches.retention ago and the audit rows older than audit.retention, and bounds its log
// (and once at its start).
const pruneEvery = time.Hour

// pruneLoop applies launches.retention and audit.retention until ctx ends.
func (d *Daemon) pruneLoop(ctx context.Context) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		d.boundLog()
		keep := d.currentConfig().WithDefaults().Launches.Retention.Duration()
		before := time.Now().Add(-keep)
		if n, err := d.db.PruneLaunches(ctx, before); err != nil {
			d.log.Warn("prune launch records", "retention", keep, "err", err)
		} else if n > 0 {
			d.log.Info("launch records pruned", "count", n, "retention", keep)
		}
		d.pruneLaunchFolders(ctx, before)
		keepAudit := d.currentConfig().WithDefaults().Audit.Retention.Duration()
		if n, err := d.db.PruneAudit(ctx, time.Now().Add(-keepAudit)); err != nil {
			d.log.Warn("prune audit rows", "retention", keepAudit, "err", err)
		} else if n > 0 {
			d.log.Info("audit rows pruned", "count", n, "retention", keepAudit)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (d *Daemon) servePrune(w http.ResponseWriter, r *http.Request) error {
	var req api.PruneRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.OlderThan < 0 {
		return &api.Error{Code: api.CodeBadRequest, Message: fmt.Sprintf("olderThan %v is negative", req.OlderThan)}
	}
	before := time.Now().Add(-req.OlderThan)
	n, err := d.db.PruneLaunches(r.Context(), before)
	if err != nil {
		return &api.Error{Code: api.CodeStoreFailed, Message: err.Error()}
	}
	d.log.Info("launches pruned", "count", n, "endedBefore", before)
	d.pruneLaunchFolders(r.Context(), before)
	writeJSON(w, http.StatusOK, api.PruneResult{Pruned: n, Before: before.UTC()})
	return nil
}
