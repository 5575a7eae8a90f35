package daemon

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
)

// reloadConfig reads the configuration again. An invalid file is logged and remembered for
// /v0/info, and the daemon keeps its last good configuration for what is already running (the
// brokers of running boxes, the violation scanner): nothing of a bad file is applied. New
// launches are refused until the file is fixed (launchConfig).
func (d *Daemon) reloadConfig() *config.Effective {
	eff, _ := d.reloadConfigErr()
	return eff
}

// reloadConfigErr is reloadConfig that also returns why the files were refused, nil when
// the configuration returned is theirs.
func (d *Daemon) reloadConfigErr() (*config.Effective, error) {
	eff, err := config.Load(d.opts.Config)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if d.cfgErr == nil || d.cfgErr.Error() != err.Error() {
			d.log.Error("configuration refused; keeping the last good one for running boxes and refusing new launches", "err", err)
		}
		d.cfgErr = err
		return d.cfg, err
	}
	d.cfg, d.cfgErr = eff, nil
	return eff, nil
}

// launchConfig returns the configuration a new launch runs with, or the refusal of a launch
// while a config or policy file is invalid: a launch never runs on a configuration other than
// the one the files say (the last good one may be looser than what the user just wrote), and
// the refusal names the file, line and reason every time.
func (d *Daemon) launchConfig() (*config.Effective, error) {
	eff, err := d.reloadConfigErr()
	if err != nil {
		return nil, &api.Error{Code: api.CodeConfigInvalid, Message: "the configuration is invalid, so nothing is launched: " + err.Error(),
			Hint: "fix the file named (agentbox config validate FILE checks it); boxes already running keep the last good configuration"}
	}
	return eff, nil
}

// lockedKey refuses a change of key by what (a per-run flag, a launcher's request) when the
// system policy sets key: the refusal names the policy file, line and key.
func lockedKey(eff *config.Effective, key, what string) error {
	if !eff.Locked(key) {
		return nil
	}
	src := eff.Sources[key]
	at := src.File
	if src.Line > 0 {
		at = fmt.Sprintf("%s:%d", src.File, src.Line)
	}
	return &api.Error{Code: api.CodeConfigLocked, Message: fmt.Sprintf("%s is refused: %s is locked by the system policy (%s)", what, key, at),
		Hint: "run without it, or ask the administrator to change " + key + " in " + src.File}
}
