//go:build !unix

package relay

import "os/exec"

// ownGroup: no process groups here; the command's own kill and WaitDelay bound the run.
func ownGroup(*exec.Cmd) {}
