//go:build !linux

package execstage

// Main is the entry point of `agentbox box-exec`; the exec stage is Linux-only.
func Main(args []string) int { return 1 }
