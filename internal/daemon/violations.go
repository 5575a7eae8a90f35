package daemon

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/wrap"
)

// recentViolations is how many violations /v0/info and /v0/violations list.
const recentViolations = 20

// defaultScanInterval applies when the configuration leaves containment.scanInterval zero.
const defaultScanInterval = 10 * time.Second

// violationScanner is wrap mode's backstop: it finds the managed programs (containment.programs)
// running outside every box, records each process once, and kills it under the terminate
// posture. A launcher on PATH makes the plain name run boxed; a run by the vendor's full path
// bypasses it, and this is what sees it.
type violationScanner struct {
	d       *Daemon
	scanner wrap.Scanner

	scanMu sync.Mutex // one scan at a time
	seen   map[procKey]string

	mu    sync.Mutex // guards state
	state api.Violations
}

// procKey names one process across pid reuse.
type procKey struct {
	pid   int
	start uint64
}

// startViolations starts the periodic scan; it ends with ctx.
func (d *Daemon) startViolations(ctx context.Context) {
	v := &violationScanner{d: d, seen: map[procKey]string{}}
	d.mu.Lock()
	d.violations = v
	d.mu.Unlock()
	go func() {
		for {
			interval := defaultScanInterval
			if cfg := d.reloadConfig().Config.Containment; len(cfg.Programs) > 0 {
				if _, err := v.scan(ctx, cfg); err != nil && ctx.Err() == nil {
					d.log.Warn("violation scan failed", "err", err)
				}
				if cfg.ScanInterval > 0 {
					interval = cfg.ScanInterval.Duration()
				}
			} else {
				v.idle()
			}
			t := time.NewTimer(interval)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}

// idle records that no program is managed.
func (v *violationScanner) idle() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.state.Posture, v.state.Programs, v.state.ScanError = "", nil, ""
}

// posture returns the configured posture ("" means report).
func posture(c config.Containment) string {
	if c.Violations == "" {
		return config.ViolationsReport
	}
	return c.Violations
}

// scan looks for native runs now and returns the violations it recorded.
func (v *violationScanner) scan(ctx context.Context, c config.Containment) ([]api.Violation, error) {
	v.scanMu.Lock()
	defer v.scanMu.Unlock()
	pathEnv := os.Getenv("PATH")
	var targets []wrap.Target
	var progs []api.ManagedProgram
	for _, p := range c.Programs {
		mp := api.ManagedProgram{Name: p.Name, Path: p.Path}
		t, err := wrap.Canonicalize(p.Name, p.Path, pathEnv)
		if err != nil {
			mp.Error = err.Error()
		} else {
			mp.Executable, mp.Script = t.Path, t.Script
			targets = append(targets, t)
		}
		progs = append(progs, mp)
	}
	pos := posture(c)
	v.mu.Lock()
	v.state.Posture, v.state.Programs = pos, progs
	v.mu.Unlock()

	findings, err := v.scanner.Scan(targets)
	if err != nil {
		v.finish(err)
		return nil, err
	}
	var found []api.Violation
	live := map[procKey]bool{}
	for _, f := range findings {
		k := procKey{f.Process.Pid, f.Process.StartTime}
		live[k] = true
		prev, seen := v.seen[k]
		if seen && (prev != api.ViolationTerminateFailed || pos != config.ViolationsTerminate) {
			continue // recorded already
		}
		rec := api.Violation{Time: f.Seen, Program: f.Target.Name, Path: f.Target.Path, Pid: f.Process.Pid,
			StartTime: f.Process.StartTime, Exe: f.Process.Exe, PPid: f.Process.PPid, ParentExe: f.Process.ParentExe,
			UID: f.Process.UID, Cmdline: f.Process.Cmdline, Action: api.ViolationReported}
		if pos == config.ViolationsTerminate {
			rec.Action = api.ViolationTerminated
			if err := v.scanner.Terminate(f); err != nil {
				rec.Action, rec.Error = api.ViolationTerminateFailed, err.Error()
			}
		}
		if seen && rec.Action == api.ViolationTerminateFailed {
			continue // still failing: recorded already
		}
		v.seen[k] = rec.Action
		v.d.log.Warn("violation: managed program running outside every box", "program", rec.Program, "pid", rec.Pid,
			"exe", rec.Exe, "ppid", rec.PPid, "parent", rec.ParentExe, "action", rec.Action, "err", rec.Error)
		id, err := v.d.db.AddViolation(ctx, rec)
		if err != nil {
			v.d.log.Error("record violation", "pid", rec.Pid, "err", err)
		}
		rec.ID = id
		found = append(found, rec)
	}
	for k := range v.seen {
		if !live[k] {
			delete(v.seen, k)
		}
	}
	v.finish(nil)
	return found, nil
}

func (v *violationScanner) finish(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.state.LastScan, v.state.ScanError = time.Now(), ""
	if err != nil {
		v.state.ScanError = err.Error()
	}
}

// summary returns the scanner's state with the recorded counts and the recent violations.
func (d *Daemon) violationSummary(ctx context.Context, limit int) (*api.Violations, error) {
	d.mu.Lock()
	v := d.violations
	d.mu.Unlock()
	out := &api.Violations{}
	if v != nil {
		v.mu.Lock()
		*out = v.state
		out.Programs = append([]api.ManagedProgram(nil), v.state.Programs...)
		v.mu.Unlock()
	}
	if d.db == nil {
		return out, nil
	}
	var err error
	if out.Total, out.Terminated, err = d.db.ViolationCounts(ctx); err != nil {
		return out, err
	}
	out.Recent, err = d.db.Violations(ctx, limit)
	return out, err
}

func (d *Daemon) serveViolations(w http.ResponseWriter, r *http.Request) error {
	limit := recentViolations
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return &api.Error{Code: api.CodeBadRequest, Message: "limit: a number from 1 to 1000"}
		}
		limit = n
	}
	out, err := d.violationSummary(r.Context(), limit)
	if err != nil {
		return &api.Error{Code: api.CodeStoreFailed, Message: err.Error()}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (d *Daemon) serveScanViolations(w http.ResponseWriter, r *http.Request) error {
	d.mu.Lock()
	v := d.violations
	d.mu.Unlock()
	if v == nil {
		return &api.Error{Code: api.CodeInternal, Message: "the violation scanner is not running"}
	}
	c := d.reloadConfig().Config.Containment
	var found []api.Violation
	if len(c.Programs) == 0 {
		v.idle()
	} else {
		var err error
		if found, err = v.scan(r.Context(), c); err != nil {
			if errors.Is(err, wrap.ErrNotSupported) {
				return &api.Error{Code: api.CodeBadRequest, Message: err.Error()}
			}
			return &api.Error{Code: api.CodeInternal, Message: "scan: " + err.Error()}
		}
	}
	out, err := d.violationSummary(r.Context(), recentViolations)
	if err != nil {
		return &api.Error{Code: api.CodeStoreFailed, Message: err.Error()}
	}
	out.Found = found
	writeJSON(w, http.StatusOK, out)
	return nil
}
