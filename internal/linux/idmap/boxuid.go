package idmap

// The host uids (and gids) a box started by host root runs as (docs/security.md, "Root running
// agentbox"). The range is Slots blocks of PIDs ids each; a process of pid p may take only
// the ids BoxUIDBase + k·PIDs + p of its own (Take), so no two live starting processes (shims)
// ever contend for one, and a later process of the same pid takes another block's while
// anything of an earlier box of that uid still lives. The range lies above every range a
// distribution or systemd gives accounts or containers (those end at 0x6fffffff), below
// systemd's foreign range (0x7ffe0000) and below 2^31 (ids at and above it are unsafe for
// many programs); no account may use it (Take refuses launches while one does).
const (
	BoxUIDBase = 0x70000000 // 1879048192
	// PIDs is the size of a block: the kernel's largest process id (PID_MAX_LIMIT) + 1.
	PIDs = 1 << 22
	// Slots is the number of blocks: the ids one starting process may take at once.
	Slots = 63
	// BoxUIDEnd is the first id above the range (0x7fc00000).
	BoxUIDEnd = BoxUIDBase + Slots*PIDs
)

// BoxUID returns the host uid (and gid) of slot k of the boxes that the process pid starts when
// it is host root.
func BoxUID(pid, k int) int { return BoxUIDBase + k*PIDs + pid%PIDs }

// IsBoxUID reports whether uid is one of the range's: a process of a box started by host root.
func IsBoxUID(uid int) bool { return uid >= BoxUIDBase && uid < BoxUIDEnd }
