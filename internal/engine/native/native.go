// Package native is the Linux engine: namespaces, mounts, Landlock and seccomp, with box-init
// as PID 1 of the box and box-exec as the stage that restricts and execs the program.
package native

// BoxInitMain is the entry point of `agentbox box-init` (stub: replaced by the engine's real one).
func BoxInitMain(args []string) int { return 1 }

// BoxExecMain is the entry point of `agentbox box-exec`.
func BoxExecMain(args []string) int { return 1 }
