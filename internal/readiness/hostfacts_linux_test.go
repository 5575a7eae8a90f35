package readiness

import (
	"os"
	"strings"
	"testing"
)

// TestCgroupLimitsSaysWhy: doctor's cgroupLimits line says plainly that limits are not
// enforced on this host and why, and what is bounded anyway, for each kind of host.
func TestCgroupLimitsSaysWhy(t *testing.T) {
	hybrid := []byte("9:name=systemd:/\n8:pids:/\n4:memory:/a\n1:cpu,cpuacct:/\n0::/\n")
	v2 := []byte("0::/user.slice/user-1000.slice/user@1000.service/app.slice\n")
	for _, tt := range []struct {
		name              string
		mount, dir        string
		controllers, self []byte
		owner, uid        int
		want              []string
	}{
		{"hybrid, hugetlb only", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/unified/", []byte("hugetlb\n"), hybrid, 0, 0,
			[]string{"could not delegate", "offers only hugetlb, not memory and pids", "(memory and pids bound to cgroup v1 here)"}},
		{"v1 only", "", "", nil, hybrid, -1, 1000, []string{"no cgroup v2 hierarchy (memory and pids bound to cgroup v1 here)"}},
		{"v2, not delegated", "/sys/fs/cgroup", "/sys/fs/cgroup/x", []byte("cpu memory pids\n"), v2, 0, 1000, []string{"is not delegated to uid 1000", "Delegate=yes"}},
		{"v2, delegated", "/sys/fs/cgroup", "/sys/fs/cgroup/x", []byte("cpu memory pids\n"), v2, 1000, 1000, []string{"yet, though /sys/fs/cgroup/x is delegated to uid 1000 with memory and pids"}},
		{"v2, no controller", "/sys/fs/cgroup", "/sys/fs/cgroup/x", []byte("\n"), v2, 1000, 1000, []string{"offers no controller"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := cgroupVerdict(tt.mount, tt.dir, tt.controllers, tt.self, tt.owner, tt.uid)
			for _, w := range append(tt.want, "not enforced on this host: a box's memory and CPU are not limited", "bounded all the same: processes (processLimit)") {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
		})
	}
	if got := cgroupV2Path(v2); got != "/user.slice/user-1000.slice/user@1000.service/app.slice" {
		t.Errorf("cgroupV2Path: %q", got)
	}
	// This host, as it is: the line must begin with the verdict whatever the host.
	if got := cgroupLimits(); !strings.HasPrefix(got, "not enforced on this host: ") {
		t.Errorf("cgroupLimits() = %q", got)
	} else {
		t.Logf("uid %d: %s", os.Getuid(), got)
	}
}
