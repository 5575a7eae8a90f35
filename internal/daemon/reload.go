package daemon

import (
	"github.com/agentbox/agentbox/internal/config"
)

// reloadConfig reads the configuration again. An invalid file is logged and remembered for
// /v0/info, and the daemon keeps its last good configuration: nothing of a bad file is applied.
func (d *Daemon) reloadConfig() *config.Effective {
	eff, err := config.Load(d.opts.Config)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if d.cfgErr == nil || d.cfgErr.Error() != err.Error() {
			d.log.Error("configuration refused; keeping the last good one", "err", err)
		}
		d.cfgErr = err
		return d.cfg
	}
	d.cfg, d.cfgErr = eff, nil
	return eff
}
