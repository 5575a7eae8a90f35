package readiness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/hostprog"
)

// HostFacts returns what this host says about the features boxes rest on: kernel release,
// Landlock ABI ("0" when unavailable), user namespace limits, seccomp, cgroup version, LSMs,
// and where bwrap is ("" when not on PATH). Missing files leave their key out.
func HostFacts() map[string]string {
	f := map[string]string{}
	read := func(key, path string) {
		if b, err := os.ReadFile(path); err == nil {
			f[key] = strings.TrimSpace(string(b))
		}
	}
	read(FactRelease, "/proc/sys/kernel/osrelease")
	read(FactMaxUserNamespaces, "/proc/sys/user/max_user_namespaces")
	read(FactUsernsClone, "/proc/sys/kernel/unprivileged_userns_clone")
	read(FactAppArmorUserns, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
	read(FactLSM, "/sys/kernel/security/lsm")
	abi := 0
	if v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */); errno == 0 {
		abi = int(v)
	}
	f[FactLandlockABI] = strconv.Itoa(abi)
	f[FactSeccomp] = "unavailable"
	if b, err := os.ReadFile("/proc/self/status"); err == nil && strings.Contains(string(b), "\nSeccomp:") {
		// A NULL filter fails with EFAULT or EACCES where seccomp exists, ENOSYS where it does not.
		if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, 1 /* SECCOMP_SET_MODE_FILTER */, 0, 0); errno != unix.ENOSYS {
			f[FactSeccomp] = "available"
		}
	}
	f[FactCgroup] = cgroupVersion()
	f[FactCgroupLimits] = cgroupLimits()
	// The kernel exempts only host root from RLIMIT_NPROC, and a box started by host root runs
	// as a box uid of its own (idmap.Remap).
	f[FactProcessLimit] = "enforced: RLIMIT_NPROC = limits.processes, counted per box (its user namespace)"
	if p, err := hostprog.Path("bwrap"); err == nil {
		f[FactBwrap] = p
	}
	return f
}

func cgroupVersion() string {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return "unknown"
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return "v2"
	}
	if err := unix.Statfs("/sys/fs/cgroup/unified", &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return "v1 (hybrid, v2 at /sys/fs/cgroup/unified)"
	}
	return "v1"
}

// cgroupLimits says, plainly, whether a box's memory and CPU are limited on this host: never
// today, since agentbox places boxes in no cgroup. The answer says why not here, naming what
// the host's cgroup v2 hierarchy offers the calling user (its memory and pids controllers,
// delegated through a systemd user scope or a unit's subtree, are what limits would need) and
// which controllers cgroup v1 holds instead, and what is bounded anyway.
func cgroupLimits() string {
	self, _ := os.ReadFile("/proc/self/cgroup")
	mount := "/sys/fs/cgroup"
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		mount = "/sys/fs/cgroup/unified"
		if err := unix.Statfs(mount, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			mount = ""
		}
	}
	var ctl []byte
	owner := -1
	dir := ""
	if mount != "" {
		dir = filepath.Join(mount, cgroupV2Path(self))
		ctl, _ = os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		var dst unix.Stat_t
		if unix.Stat(dir, &dst) == nil {
			owner = int(dst.Uid)
		}
	}
	return cgroupVerdict(mount, dir, ctl, self, owner, os.Getuid())
}

// cgroupBounded is what bounds a box on a host where cgroups limit nothing.
const cgroupBounded = "; bounded all the same: processes (processLimit) and each tmpfs of the box (limits.tmpMiB, limits.homeMiB, limits.shmMiB); docs/security.md, \"Side channels and resource use\""

// cgroupVerdict words cgroupLimits' answer from what it read: the v2 mount ("" for none), the
// calling process's v2 folder, that folder's cgroup.controllers and owner (-1 when unknown),
// /proc/self/cgroup, and the caller's uid.
func cgroupVerdict(mount, dir string, controllers, self []byte, owner, uid int) string {
	const head = "not enforced on this host: a box's memory and CPU are not limited, for agentbox places boxes in no cgroup"
	var v1 []string
	for _, l := range strings.Split(string(self), "\n") {
		if n, rest, ok := strings.Cut(l, ":"); ok && n != "0" {
			names, _, _ := strings.Cut(rest, ":")
			for _, c := range strings.Split(names, ",") {
				if c == "memory" || c == "pids" {
					v1 = append(v1, c)
				}
			}
		}
	}
	slices.Sort(v1)
	onV1 := ""
	if len(v1) > 0 {
		onV1 = fmt.Sprintf(" (%s bound to cgroup v1 here)", strings.Join(v1, " and "))
	}
	if mount == "" {
		return head + ", and this host has no cgroup v2 hierarchy" + onV1 + cgroupBounded
	}
	if controllers == nil {
		return head + fmt.Sprintf(", and %s cannot be read", filepath.Join(dir, "cgroup.controllers")) + cgroupBounded
	}
	have := strings.Fields(string(controllers))
	if !slices.Contains(have, "memory") || !slices.Contains(have, "pids") {
		offers := "no controller"
		if len(have) > 0 {
			offers = "only " + strings.Join(have, " ")
		}
		return head + fmt.Sprintf(", and this host could not delegate the limits: its cgroup v2 hierarchy at %s offers %s, not memory and pids%s", mount, offers, onV1) + cgroupBounded
	}
	if owner != uid {
		return head + fmt.Sprintf(", and %s (memory, pids) is not delegated to uid %d (a systemd user scope or a unit with Delegate=yes would)", dir, uid) + cgroupBounded
	}
	return head + fmt.Sprintf(" yet, though %s is delegated to uid %d with memory and pids", dir, uid) + cgroupBounded
}

// cgroupV2Path returns the cgroup v2 path of /proc/self/cgroup's "0::" line.
func cgroupV2Path(self []byte) string {
	p := ""
	for _, l := range strings.Split(string(self), "\n") {
		if q, ok := strings.CutPrefix(l, "0::"); ok {
			p = q
		}
	}
	return p
}
