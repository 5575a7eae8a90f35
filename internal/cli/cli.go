// Package cli implements the agentbox command line; it reaches the daemon only through
// internal/client.
package cli

// Execute runs the command line and returns the process exit code (stub).
func Execute() int { return 0 }
