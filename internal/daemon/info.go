package daemon

import (
	"net/http"
	"os"
	"strings"

	"github.com/agentbox/agentbox/internal/api"
)

func (d *Daemon) serveInfo(w http.ResponseWriter, r *http.Request) error {
	d.reloadConfig() // the files as they are now: a file broken since the last launch shows
	d.mu.Lock()
	n := len(d.launches)
	cfg := d.cfg
	cfgErr := ""
	if d.cfgErr != nil {
		cfgErr = d.cfgErr.Error()
	}
	d.mu.Unlock()
	v := d.version()
	viol, err := d.violationSummary(r.Context(), 5)
	if err != nil {
		d.log.Warn("info: violations", "err", err)
	}
	writeJSON(w, http.StatusOK, api.Info{
		Version: v, Engine: cfg.Config.Engine, Socket: d.socket, Pid: os.Getpid(), UID: os.Getuid(),
		Kernel: kernelFacts(), Launches: n, RuntimeDir: d.runtimeDir, StateDir: d.stateDir, BoxBinary: d.boxBinary(), ConfigFiles: cfg.Files(), ConfigError: cfgErr,
		Readiness: d.readinessStatus(), Posture: d.posture(), Violations: viol,
		Relay: d.relayActivity(), Sessions: d.liveSessions(), RelayNotice: d.relayNotice(),
	})
	return nil
}

// kernelFacts reports what the daemon sees of the kernel features boxes rest on.
func kernelFacts() map[string]string {
	f := map[string]string{}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		f["release"] = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		f["maxUserNamespaces"] = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil {
		f["lsm"] = strings.TrimSpace(string(b))
	}
	f["landlockABI"] = landlockABI()
	return f
}

// relayNotice is the relay broker's notice of a loopback address it could not keep, "" if none.
func (d *Daemon) relayNotice() string {
	if d.relay == nil {
		return ""
	}
	return d.relay.notice()
}

// version is the daemon's version as it reports it ("dev" when unset).
func (d *Daemon) version() string {
	if d.opts.Version == "" {
		return "dev"
	}
	return d.opts.Version
}
