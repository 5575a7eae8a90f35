// Package ns reads and creates Linux namespaces for the engines, the shim and the readiness
// probe: the clone flags of namespaces by name, the namespace inodes of a process (/proc/PID/ns),
// the processes left in a pid namespace (a box's settlement), and the loopback of a new network
// namespace.
package ns

// Kinds are the namespaces Inodes reports, as named under /proc/<pid>/ns.
var Kinds = []string{"cgroup", "ipc", "mnt", "net", "pid", "user", "uts"}
