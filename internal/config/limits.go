package config

// Limits bounds what one box may hold: its memory-backed file systems (tmpfs), whose pages are
// memory the box can fill and keep while it runs (without a size each would be half of the
// host's RAM, the kernel's default), and its processes.
type Limits struct {
	// TmpMiB is the size of the box's /tmp in MiB. Zero means 2048.
	TmpMiB int `json:"tmpMiB,omitempty" jsonschema:"minimum=1,maximum=1048576" jsonschema_description:"Size of a box's /tmp (a tmpfs) in MiB (default 2048)."`
	// HomeMiB is the size in MiB of the box's home and of each private folder a profile gives
	// it (tmpfs mounts). Zero means 2048.
	HomeMiB int `json:"homeMiB,omitempty" jsonschema:"minimum=1,maximum=1048576" jsonschema_description:"Size in MiB of a box's home and of each private folder a profile gives it (tmpfs mounts; default 2048)."`
	// Processes is the most processes (threads count) a box's programs may run at once: the
	// RLIMIT_NPROC of the program, which the kernel counts per user namespace, so per box. It
	// binds a root-run box too, which runs as a box uid of its own. Zero means 2048.
	Processes int `json:"processes,omitempty" jsonschema:"minimum=16,maximum=4194304" jsonschema_description:"Most processes and threads a box's programs may run at once (RLIMIT_NPROC, counted per box; default 2048)."`
	// ShmMiB is the size of the box's /dev/shm in MiB. Zero means 64.
	ShmMiB int `json:"shmMiB,omitempty" jsonschema:"minimum=1,maximum=1048576" jsonschema_description:"Size of a box's /dev/shm (a tmpfs) in MiB (default 64)."`
}
