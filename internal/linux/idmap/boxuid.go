package idmap

// The host uids (and gids) a box started by host root runs as (docs/security.md, "Root running
// agentbox"): BoxUIDBase + the process id of the process that starts it (its shim), so that no
// two live shims share one. The range lies above every range a distribution gives accounts or
// containers and below 2^31 (ids at and above it are unsafe for many programs); no account may
// use it.
const (
	BoxUIDBase = 0x70000000 // 1879048192
	// BoxUIDs is the size of the range: the kernel's largest process id (PID_MAX_LIMIT) + 1.
	BoxUIDs = 1 << 22
)

// BoxUID returns the host uid (and gid) of the boxes that the process pid starts when it is
// host root.
func BoxUID(pid int) int { return BoxUIDBase + pid%BoxUIDs }

// IsBoxUID reports whether uid is one of the range's: a process of a box started by host root.
func IsBoxUID(uid int) bool { return uid >= BoxUIDBase && uid < BoxUIDBase+BoxUIDs }
