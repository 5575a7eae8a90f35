package readiness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
	if p, err := exec.LookPath("bwrap"); err == nil {
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

// cgroupLimits says whether boxes' memory and processes are limited through cgroups. agentbox
// does not place boxes in cgroups (yet): the answer says why they are not enforced, naming
// whether this host delegates the memory and pids controllers of the cgroup v2 hierarchy to
// the calling user (a systemd user scope, or a unit's delegated subtree), which they need.
func cgroupLimits() string {
	mount := "/sys/fs/cgroup"
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		mount = "/sys/fs/cgroup/unified"
		if err := unix.Statfs(mount, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			return "not enforced: no cgroup v2 hierarchy"
		}
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "not enforced: " + err.Error()
	}
	self := ""
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			self = p
		}
	}
	dir := filepath.Join(mount, self)
	ctl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "not enforced: " + err.Error()
	}
	have := strings.Fields(string(ctl))
	if !slices.Contains(have, "memory") || !slices.Contains(have, "pids") {
		return fmt.Sprintf("not enforced: the cgroup v2 hierarchy at %s offers %q here, not memory and pids", mount, strings.Join(have, " "))
	}
	var dst unix.Stat_t
	if err := unix.Stat(dir, &dst); err != nil || int(dst.Uid) != os.Getuid() {
		return fmt.Sprintf("not enforced: %s is not delegated to uid %d", dir, os.Getuid())
	}
	return fmt.Sprintf("not enforced: %s is delegated (memory, pids) but agentbox does not place boxes in cgroups", dir)
}
