//go:build !linux

package integrity

import "os/exec"

// runCheckGit runs c and returns its standard output (no watch for FIFOs: Linux only).
func runCheckGit(c *exec.Cmd) ([]byte, error) { return c.Output() }
