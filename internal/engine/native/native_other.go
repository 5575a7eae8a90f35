//go:build !linux

package native

import "github.com/agentbox/agentbox/internal/engine"

func start(req []byte, io engine.IO) (*engine.Box, error) { return nil, engine.ErrNotSupported }

// BoxInitMain is the entry point of `agentbox box-init`; the native engine is Linux-only.
func BoxInitMain(args []string) int { return 1 }

// BoxExecMain is the entry point of `agentbox box-exec`; the native engine is Linux-only.
func BoxExecMain(args []string) int { return 1 }

// NamespaceKinds are the namespaces Namespaces reports.
var NamespaceKinds = []string{"cgroup", "ipc", "mnt", "net", "pid", "user", "uts"}

// Namespaces is not supported off Linux.
func Namespaces(pid int) (map[string]uint64, error) { return nil, engine.ErrNotSupported }

// PidNamespace is not supported off Linux.
func PidNamespace(pid int) (uint64, error) { return 0, engine.ErrNotSupported }

// Remaining is not supported off Linux.
func Remaining(pidNS uint64) ([]int, error) { return nil, engine.ErrNotSupported }

// Settled is not supported off Linux.
func Settled(pidNS uint64) (bool, error) { return false, engine.ErrNotSupported }
