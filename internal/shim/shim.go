// Package shim is the per-box supervisor process: it starts the box through its engine, holds the
// console and the exit status, and outlives daemon restarts.
package shim

// Main is the entry point of `agentbox box-shim LAUNCHDIR` (stub).
func Main(args []string) int { return 1 }
