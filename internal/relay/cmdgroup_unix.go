//go:build unix

package relay

import (
	"os/exec"
	"syscall"
)

// ownGroup makes cmd the leader of a process group of its own and, when its context ends,
// kills the whole group: a credential helper that left a child holding its output (a shell
// running `sleep`, a background agent) would otherwise keep the run, and with it every request
// waiting on the credential, blocked past the timeout.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
