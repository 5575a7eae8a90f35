package daemon

import (
	"context"
	"net/http"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/readiness"
	"github.com/agentbox/agentbox/internal/shim"
)

// startReadiness starts the readiness state machine: a cached proof makes the daemon ready at
// once, otherwise the first probe runs in the background, off every request's path.
func (d *Daemon) startReadiness(ctx context.Context) {
	d.readiness = readiness.NewManager(readiness.Options{
		Config: func() config.Config {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.cfg.Config
		},
		RuntimeDir: d.runtimeDir,
		StateDir:   d.stateDir,
		Executable: boxBinary(),
		Logger:     d.log,
	})
	d.readiness.Start(ctx)
}

// boxBinary is the agentbox binary that builds boxes (the one shims run), which the probe's box
// runs as its attester; "" means the running executable.
func boxBinary() string {
	if shim.Executable == "/proc/self/exe" {
		return ""
	}
	return shim.Executable
}

// admit refuses a launch unless the readiness probe proved that this host builds and enforces
// the box (api.CodeBoxUnavailable with the reason and the hint); a launch that arrives during
// the first probe waits for it, bounded. Nothing of the launch has run when it refuses.
func (d *Daemon) admit(ctx context.Context) error {
	if d.readiness == nil {
		return &api.Error{Code: api.CodeBoxUnavailable, Message: "readiness is not being probed", Hint: "restart the daemon"}
	}
	return d.readiness.Admit(ctx)
}

// readinessStatus returns the readiness state for /v0/info, nil before it started.
func (d *Daemon) readinessStatus() *api.Readiness {
	if d.readiness == nil {
		return nil
	}
	st := d.readiness.Status()
	return &st
}

func (d *Daemon) serveReadiness(w http.ResponseWriter, r *http.Request) error {
	st := d.readinessStatus()
	if st == nil {
		st = &api.Readiness{State: api.ReadinessUnknown}
	}
	writeJSON(w, http.StatusOK, st)
	return nil
}
