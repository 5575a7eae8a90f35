package daemon

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/boxhelper"
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
		Executable: attesterBinary(),
		Helper:     d.helper,
		HelperID:   helperDigest(),
		Logger:     d.log,
	})
	d.readiness.Start(ctx)
}

// attesterBinary is the agentbox binary the probe's box runs as its attester: the binary shims
// run when it is a full agentbox (tests point shim.Executable at one); "" means the running
// executable (shims run from it, or from the box helper, which has no attester).
func attesterBinary() string {
	if shim.Executable == "/proc/self/exe" || helperImage() != nil || filepath.Base(shim.Executable) == boxhelper.HelperName {
		return ""
	}
	return shim.Executable
}

// boxBinary is the executable shims start boxes from, for info: the box helper's file, of which
// the daemon took a sealed copy when it started (what runs is that copy, whatever the file
// holds now), or the agentbox binary.
func (d *Daemon) boxBinary() string {
	if d.helper != "" {
		return d.helper
	}
	if shim.Executable == "/proc/self/exe" {
		exe, _ := os.Executable()
		return exe
	}
	return shim.Executable
}

// sealedHelper is the sealed copy of the box helper shims start from (boxhelper.Image), nil
// when they start from agentbox itself. It is process-wide, as shim.Executable is, and lives as
// long as the process: shim.Executable names its descriptor.
var sealedHelper struct {
	sync.Mutex
	img *boxhelper.Image
}

func helperImage() *boxhelper.Image {
	sealedHelper.Lock()
	defer sealedHelper.Unlock()
	return sealedHelper.img
}

// helperDigest is the content digest of the sealed helper, "" when there is none.
func helperDigest() string {
	if img := helperImage(); img != nil {
		return img.Digest
	}
	return ""
}

// useHelper makes shims start from the box helper installed beside the running agentbox, when
// one qualifies (boxhelper.Load); otherwise they start from agentbox itself, which serves
// the same entry points but starts each process of a launch more slowly. Shims never start from
// the helper's path: the daemon copies the file it checked into a sealed memfd now
// (boxhelper.Load) and starts every shim of its life from that copy (/proc/self/fd/N), so a
// helper replaced on disk later — by a box that can write its directory, say — is never run.
func (d *Daemon) useHelper() {
	if shim.Executable != "/proc/self/exe" {
		return // set by whoever embeds the daemon (tests), or by an earlier daemon of this process
	}
	exe, err := os.Executable()
	if err == nil {
		var img *boxhelper.Image
		if img, err = boxhelper.Load(exe); err == nil {
			sealedHelper.Lock()
			sealedHelper.img = img
			sealedHelper.Unlock()
			shim.Executable, d.helper = img.ExecPath(), img.Path
			d.log.Info("boxes start from the box helper (a sealed copy taken now)", "helper", img.Path, "sha256", img.Digest)
			return
		}
	}
	d.log.Info("boxes start from agentbox itself (no box helper)", "reason", err)
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
