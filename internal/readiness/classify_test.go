package readiness_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/readiness"
)

// TestClassify pins how start-up failures (as the engines word them) and host facts map to
// reasons; the live fault injections cover userns_unavailable, landlock_unavailable and
// engine_missing end to end.
func TestClassify(t *testing.T) {
	ok := map[string]string{"maxUserNamespaces": "15000", "landlockABI": "7"}
	for _, tc := range []struct {
		name, code, msg string
		host            map[string]string
		want            readiness.Reason
	}{
		{"userns limit 0", "box_setup_failed", "box setup failed: start box-init: fork/exec /proc/self/exe: no space left on device", ok, readiness.ReasonUserNSUnavailable},
		{"userns sysctl", "box_setup_failed", "anything", map[string]string{"maxUserNamespaces": "0"}, readiness.ReasonUserNSUnavailable},
		{"bwrap userns", "box_setup_failed", "bwrap: Creating new namespace failed: No space left on device", ok, readiness.ReasonUserNSUnavailable},
		{"apparmor", "box_setup_failed", "start box-init: fork/exec /proc/self/exe: operation not permitted",
			map[string]string{"maxUserNamespaces": "15000", "apparmorRestrictUnprivilegedUserns": "1"}, readiness.ReasonUserNSRestricted},
		{"eperm without apparmor", "box_setup_failed", "bwrap: setting up uid map: Permission denied", ok, readiness.ReasonUserNSUnavailable},
		{"no landlock", "box_setup_failed", "landlock: not available (function not implemented); agentbox needs Landlock ABI 2", ok, readiness.ReasonLandlockUnavailable},
		{"old landlock", "box_setup_failed", "landlock: kernel has ABI 1, agentbox needs 2 or newer", ok, readiness.ReasonLandlockABITooOld},
		{"seccomp", "box_setup_failed", "seccomp: load seccomp filter: invalid argument", ok, readiness.ReasonSeccompUnavailable},
		{"loopback", "box_setup_failed", "bring lo up: operation not permitted", ok, readiness.ReasonNetworkSetupFailed},
		{"mount", "box_setup_failed", "bind /srv/x: open source /srv/x: no such file or directory", ok, readiness.ReasonMountFailed},
		{"bwrap mount", "box_setup_failed", "bwrap: Can't find source path /srv/x: No such file or directory", ok, readiness.ReasonMountFailed},
		{"bwrap missing", "engine_not_supported", "engine not supported on this platform: bwrap is not installed (not found on PATH)", ok, readiness.ReasonEngineMissing},
		{"other", "box_setup_failed", "something else entirely", ok, readiness.ReasonBoxSetupFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readiness.Classify(tc.code, tc.msg, tc.host); got.Reason != tc.want || got.Detail == "" {
				t.Errorf("Classify = %v, want %s", got, tc.want)
			}
		})
	}
}
