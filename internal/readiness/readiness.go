// Package readiness proves, before any launch is admitted, that this host can build and
// enforce the box: a probe starts a throwaway box with the production engine, plan shape and
// shim, and the program in it (agentbox itself, `readiness-attest`) attests as JSON each fact
// it verified; the prober checks every fact against what the plan requires, together with
// what only the host can see (the box's namespace ids, the settlement of its pid namespace).
//
// The Manager runs the state machine the daemon admits launches by: unknown → probing → ready
// | unavailable{reason, detail, hint, since, nextRetry}. Probes run off the request path; a
// positive result is cached on disk until the configuration, the kernel or the agentbox
// binary changes; a negative one is retried in the background with backoff, and the first
// success admits launches without a restart. Probes of every process of a user (daemons, the
// CLI's `agentbox doctor`) are serialized by a lock file in the owner-checked runtime
// directory, and each probe reclaims what a probe killed mid-way left behind.
package readiness

import (
	"errors"
	"fmt"
)

// Reason is the typed reason a host cannot build the box. Each has a one-line Hint.
type Reason string

// Reasons.
const (
	ReasonUserNSUnavailable   Reason = "userns_unavailable"
	ReasonUserNSRestricted    Reason = "userns_restricted"
	ReasonLandlockUnavailable Reason = "landlock_unavailable"
	ReasonLandlockABITooOld   Reason = "landlock_abi_too_old"
	ReasonSeccompUnavailable  Reason = "seccomp_unavailable"
	ReasonMountFailed         Reason = "mount_failed"
	ReasonNetworkSetupFailed  Reason = "network_setup_failed"
	ReasonAttestationFailed   Reason = "attestation_failed"
	ReasonProbeTimeout        Reason = "probe_timeout"
	ReasonEngineMissing       Reason = "engine_missing"
	// ReasonUnsettled: the probe could not prove that its box ended with nothing left running.
	ReasonUnsettled Reason = "probe_unsettled"
	// ReasonRuntimeDirRefused: the runtime directory or the probe lock belongs to another uid
	// or lets others in (squatting); the probe fails closed.
	ReasonRuntimeDirRefused Reason = "runtime_dir_refused"
	// ReasonBoxSetupFailed: the box failed to start for a reason none of the above names.
	ReasonBoxSetupFailed Reason = "box_setup_failed"
)

var hints = map[Reason]string{
	ReasonUserNSUnavailable:   "enable unprivileged user namespaces: sysctl -w user.max_user_namespaces=15000 (and kernel.unprivileged_userns_clone=1 where it exists)",
	ReasonUserNSRestricted:    "AppArmor restricts unprivileged user namespaces: install agentbox's AppArmor profile, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
	ReasonLandlockUnavailable: "boot a kernel with Landlock enabled (CONFIG_SECURITY_LANDLOCK=y and landlock in the lsm= list)",
	ReasonLandlockABITooOld:   "upgrade the kernel: agentbox needs Landlock ABI 2 (Linux 5.19), and ABI 6 (Linux 6.12) with egress: allow or for signal scoping",
	ReasonSeccompUnavailable:  "boot a kernel with seccomp filters (CONFIG_SECCOMP_FILTER=y)",
	ReasonMountFailed:         "the box's filesystem could not be built: check that / is not mounted with unusual propagation and see `agentbox doctor` for the failing step",
	ReasonNetworkSetupFailed:  "the box's network namespace could not be set up: see `agentbox doctor` for the failing step",
	ReasonAttestationFailed:   "the box started but did not enforce a required property: run `agentbox doctor` and report the failing fact",
	ReasonProbeTimeout:        "the probe box did not finish in time: check system load, then run `agentbox doctor`",
	ReasonEngineMissing:       "install the engine's program (for engine: bwrap, install bubblewrap) or set engine: native",
	ReasonUnsettled:           "a probe box could not be proven gone: look for stray agentbox processes (ps -ef | grep agentbox) and run `agentbox doctor`",
	ReasonRuntimeDirRefused:   "agentbox's runtime directory or probe lock belongs to another user or is open to others: remove it as its owner or root",
	ReasonBoxSetupFailed:      "the box could not be started: run `agentbox doctor` for the failing step",
}

// Hint returns the one-line remediation of r.
func (r Reason) Hint() string {
	if h, ok := hints[r]; ok {
		return h
	}
	return "run `agentbox doctor`"
}

// Reasons lists every reason, for documentation and tests.
func Reasons() []Reason {
	return []Reason{ReasonUserNSUnavailable, ReasonUserNSRestricted, ReasonLandlockUnavailable, ReasonLandlockABITooOld,
		ReasonSeccompUnavailable, ReasonMountFailed, ReasonNetworkSetupFailed, ReasonAttestationFailed, ReasonProbeTimeout,
		ReasonEngineMissing, ReasonUnsettled, ReasonRuntimeDirRefused, ReasonBoxSetupFailed}
}

// Error is a failed probe: a typed reason and what exactly failed.
type Error struct {
	Reason Reason
	Detail string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Reason, e.Detail) }

// ErrNotSupported is returned off Linux.
var ErrNotSupported = errors.New("readiness probes need Linux")

func failf(r Reason, format string, a ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, a...)}
}
