// Package plan describes one launch as a neutral, deterministic LaunchPlan that every engine renders.
package plan

// Console says how the program's standard streams are wired.
type Console string

const (
	// ConsoleTTY runs the program on a PTY allocated in the box's own devpts; the shim holds the master.
	ConsoleTTY Console = "tty"
	// ConsolePipe gives the program plain pipes for stdin, stdout and stderr, held by the shim.
	ConsolePipe Console = "pipe"
)

// MountKind names what a Mount does.
type MountKind string

const (
	// MountBind binds Source at Target (read-only when ReadOnly is set).
	MountBind MountKind = "bind"
	// MountTmpfs mounts an empty tmpfs at Target.
	MountTmpfs MountKind = "tmpfs"
	// MountMask hides Target: an empty read-only file or directory is bound over it.
	MountMask MountKind = "mask"
	// MountOverlay mounts at Target an overlay whose lower layer is Source, a host folder the
	// box reads and never writes, and whose upper layer is Upper, where every write goes (Work
	// is the overlay's work folder, on Upper's filesystem). Upper and Work must lie beneath
	// Beneath, which no symlink may lead out of. An engine that cannot build an overlay binds
	// Upper alone at Target, or Source read-only when LowerFallback is set.
	MountOverlay MountKind = "overlay"
	// MountSymlink makes a symbolic link at Target whose content is Source (relative to
	// Target's folder unless absolute), on one of the box's own tmpfs mounts: an engine refuses
	// one whose folder is a host folder bound in, where the link would be made on the host.
	MountSymlink MountKind = "symlink"
)

// Mount is one filesystem entry of the box, applied in order. Paths are absolute.
type Mount struct {
	Kind     MountKind `json:"kind"`
	Source   string    `json:"source,omitempty"`
	Target   string    `json:"target"`
	ReadOnly bool      `json:"readOnly,omitempty"`
	// Optional means a missing Source is skipped instead of failing the launch.
	Optional bool `json:"optional,omitempty"`
	// Beneath, when set, is a directory Source must resolve beneath (RESOLVE_BENEATH), so a
	// symlink planted by an earlier box cannot redirect the bind outside it.
	Beneath string `json:"beneath,omitempty"`
	// Staged says Source is a staged copy of the protected file at Target (a path beneath the
	// workspace, resolved without following symlinks): it is bound writable, so that the box's
	// writes stay in the copy, and kept for the box's life like the read-only binds; should the
	// host replace the file at Target, the engine binds the host's new file read-only instead.
	Staged bool `json:"staged,omitempty"`
	// Upper and Work are an overlay's writable layer and work folder (MountOverlay only).
	Upper string `json:"upper,omitempty"`
	Work  string `json:"work,omitempty"`
	// LowerFallback says that an engine that cannot build the overlay binds Source read-only
	// at Target instead of Upper alone: the host's folder as it is, never written, for a folder
	// whose host content a box needs more than a writable layer of its own (cargo's home: its
	// registry, and the toolchain beside it). MountOverlay only.
	LowerFallback bool `json:"lowerFallback,omitempty"`
	// SourceBeneath, when set, is a directory an overlay's Source must resolve beneath
	// (RESOLVE_BENEATH): a folder of the workspace, which another box may have replaced with a
	// symlink meanwhile. MountOverlay only.
	SourceBeneath string `json:"sourceBeneath,omitempty"`
	// Volatile mounts the overlay with the kernel's volatile option: nothing written to Upper
	// is synced, neither on fsync in the box nor at the overlay's unmount, so a host crash may
	// leave Upper with lost or torn writes. For a box cache's layer only, whose content can be
	// rebuilt (docs/toolchains.md, "The box caches' durability"). MountOverlay only.
	Volatile bool `json:"volatile,omitempty"`
	// SizeMiB is the size of a tmpfs mount in MiB. Build sets it on every tmpfs mount; an
	// engine refuses a tmpfs mount without one.
	SizeMiB int `json:"sizeMiB,omitempty"`
}

// Egress is the network mode of the box.
type Egress string

const (
	// EgressDeny gives the box its own network namespace with loopback only.
	EgressDeny Egress = "deny"
	// EgressAllow shares the host network (explicit, logged at every launch).
	EgressAllow Egress = "allow"
)

// Forward is an in-box loopback TCP port that box-init forwards to a unix socket.
type Forward struct {
	Port   int    `json:"port"`
	Socket string `json:"socket"` // path inside the box, under /run/agentbox
	// Handoff says that the server on Socket takes connections handed over (package
	// handoff): box-init then passes it each connection it accepts instead of copying the
	// connection's bytes to and from the socket.
	Handoff bool `json:"handoff,omitempty"`
}

// Network describes the box's network.
type Network struct {
	Egress   Egress    `json:"egress"`
	Forwards []Forward `json:"forwards,omitempty"`
}

// Landlock lists the filesystem grants the program runs under; paths are in-box paths.
type Landlock struct {
	// MinABI is the lowest Landlock ABI the launch accepts (2: ABI 1 refuses cross-directory renames).
	MinABI int      `json:"minABI"`
	RO     []string `json:"ro,omitempty"`     // read and execute
	RW     []string `json:"rw,omitempty"`     // read, write, create, remove
	Dev    []string `json:"dev,omitempty"`    // devices: read, write and ioctl (ttys)
	ROFile []string `json:"roFile,omitempty"` // single files, read only
	RWFile []string `json:"rwFile,omitempty"` // single files, read and write (e.g. /dev/null)
}

// RunDir is where the launch's run directory is bound inside every box.
const RunDir = "/run/agentbox"

// Plan is everything an engine needs to build one box. It is produced by Build, is pure data,
// and renders to identical bytes for identical inputs.
type Plan struct {
	ID        string   `json:"id"`
	Profile   string   `json:"profile"`
	Program   string   `json:"program"` // absolute path, valid inside the box
	Args      []string `json:"args"`    // argv[1:]
	Cwd       string   `json:"cwd"`
	Env       []string `json:"env"` // sorted KEY=VALUE, built from an allowlist
	UID       int      `json:"uid"`
	GID       int      `json:"gid"`
	Home      string   `json:"home"`
	Workspace string   `json:"workspace"`
	Hostname  string   `json:"hostname"`
	// RunDir is the host directory bound at /run/agentbox (relay and agent sockets, generated files).
	RunDir   string   `json:"runDir"`
	Mounts   []Mount  `json:"mounts"`
	Landlock Landlock `json:"landlock"`
	Network  Network  `json:"network"`
	Console  Console  `json:"console"`
	// ShmMiB is the size of the box's /dev/shm (a tmpfs the engine mounts) in MiB.
	ShmMiB int `json:"shmMiB"`
	// MaxProcs is the program's RLIMIT_NPROC: the kernel counts the tasks of the uid in the
	// box's own user namespace against it (Linux ≥ 5.14), so it bounds one box, not the user;
	// it does not bind uid 0.
	MaxProcs int `json:"maxProcs"`
	// Guards are the workspace's absent protected paths: the box may create them, but what it
	// creates there never stays on the host (the engine moves it to ChangesDir, the launch's
	// proposed changes). Nil means none.
	Guards []Guard `json:"guards,omitempty"`
	// ChangesDir is the host directory of the launch's proposed changes ("" when none): what
	// the box creates at a guarded path, or at a protected path that existed at launch and that
	// the host removed while the box ran (the engine guards it from then on).
	ChangesDir string `json:"changesDir,omitempty"`
}

// Guard is one absent protected path of the workspace, or one that is a symlink (Link)
// (docs/integrity.md, "Absent protected paths"). Whatever appears at Path — or beneath it when
// Dir is set, or as a symlink on the way to it — is moved out of the workspace into the
// launch's proposed changes the moment it appears.
type Guard struct {
	// Path is the absolute path (the same on the host and in the box).
	Path string `json:"path"`
	// Dir says the protected path is a folder: it may be created, what appears in it is moved.
	Dir bool `json:"dir,omitempty"`
	// Beneath is the workspace Path lies beneath; no symlink is followed below it.
	Beneath string `json:"beneath"`
	// Link is the target of the symlink the host had at Path when the launch started ("" when
	// Path was absent). A symlink cannot be a mount point, so the guard keeps it instead: that
	// symlink stays; whatever else appears at Path (a file, a folder, another symlink put there
	// after the box removed the host's) is moved out, and the host's symlink is made again.
	Link string `json:"link,omitempty"`
}
