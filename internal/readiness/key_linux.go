package readiness

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/hostprog"
)

// kernelIdentity is the kernel part of a Key.
func kernelIdentity() string {
	var parts []string
	for _, p := range []string{
		"/proc/sys/kernel/osrelease", "/proc/sys/kernel/version", "/proc/sys/kernel/random/boot_id",
		"/proc/sys/user/max_user_namespaces", "/proc/sys/kernel/unprivileged_userns_clone",
		"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "/sys/kernel/security/lsm",
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			parts = append(parts, "-")
			continue
		}
		parts = append(parts, strings.TrimSpace(string(b)))
	}
	return strings.Join(parts, "|")
}

// fileIdentity identifies a file by device, inode, size and times ("" when it cannot be read).
func fileIdentity(path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return ""
	}
	return fmt.Sprintf("dev=%d ino=%d size=%d mtime=%d.%09d ctime=%d.%09d",
		st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
}

// currentKey computes the key of a probe of engine with the executable exe (and the box helper
// helper, "" when shims run from exe; helperID the digest of the sealed copy shims run, or ""
// to identify the helper by its file) under config hash cfg.
func currentKey(engineName, cfg, exe, helper, helperID string) Key {
	k := Key{Engine: engineName, Config: cfg, Kernel: kernelIdentity(), Binary: fileIdentity(exe)}
	switch {
	case helper != "" && helperID != "":
		k.Helper = helper + " sha256=" + helperID
	case helper != "":
		k.Helper = helper + " " + fileIdentity(helper)
	}
	if engineName == "bwrap" {
		if p, err := hostprog.Path("bwrap"); err == nil {
			k.EngineBinary = p + " " + fileIdentity(p)
		}
	}
	return k
}
