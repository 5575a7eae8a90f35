package daemon

import "path/filepath"

// logFile is the daemon's log in the state directory: `agentbox daemon --detach` (and every
// command that starts a daemon: cli.startDetachedDaemon) appends its output and errors to it.
const logFile = "daemon.log"

// maxLogBytes bounds the daemon's log: past it, the log is moved to daemon.log.1 (replacing
// the one there) and a new one begun, so the two files hold at most twice this much. The
// brokers' records are bounded per launch (audit.maxRowsPerLaunch) but launches add up.
const maxLogBytes = 16 << 20

// boundLog applies maxLogBytes to the daemon's log when its standard output and error are that
// file (a daemon started detached); one under systemd or in a terminal is left alone.
func (d *Daemon) boundLog() {
	path := filepath.Join(d.stateDir, logFile)
	rotated, err := rotateLog(path, []int{1, 2}, maxLogBytes)
	if err != nil {
		d.log.Warn("bound the daemon log", "file", path, "err", err)
	} else if rotated {
		d.log.Info("daemon log begun afresh; the previous one is "+logFile+".1", "max", maxLogBytes)
	}
}
