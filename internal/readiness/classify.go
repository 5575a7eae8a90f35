package readiness

import (
	"strings"

	"github.com/agentbox/agentbox/internal/engine"
)

// Keys of the host facts (HostFacts).
const (
	FactRelease           = "release"
	FactLandlockABI       = "landlockABI"
	FactMaxUserNamespaces = "maxUserNamespaces"
	FactUsernsClone       = "unprivilegedUsernsClone"
	FactAppArmorUserns    = "apparmorRestrictUnprivilegedUserns"
	FactSeccomp           = "seccomp"
	FactCgroup            = "cgroup"
	FactLSM               = "lsm"
	FactBwrap             = "bwrap"
	// FactCgroupLimits says whether a box's memory and processes are limited by cgroups.
	FactCgroupLimits = "cgroupLimits"
	// FactProcessLimit says whether a box's RLIMIT_NPROC (limits.processes) binds.
	FactProcessLimit = "processLimit"
)

// Classify turns a box's typed start-up failure (the engine's code and message, as the shim
// reports it) into a reason, with the host facts deciding between causes the message alone
// cannot tell apart (an EPERM from clone is AppArmor's restriction or a disabled sysctl).
func Classify(code, message string, host map[string]string) *Error {
	m := strings.ToLower(message)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(m, s) {
				return true
			}
		}
		return false
	}
	detail := message
	if code != "" {
		detail = message + " [" + code + "]"
	}
	userns := has("new namespace", "clone", "fork/exec", "uid_map", "uid map", "setgroups", "unshare", "user namespace", "creating new namespace")
	switch {
	case code == engine.CodeEngineUnsupported || code == engine.CodeUnknownEngine || has("bwrap is not installed", "executable file not found"):
		return &Error{Reason: ReasonEngineMissing, Detail: detail}
	case host[FactMaxUserNamespaces] == "0" || host[FactUsernsClone] == "0" || (userns && has("no space left on device")):
		return &Error{Reason: ReasonUserNSUnavailable, Detail: detail}
	case userns && has("operation not permitted", "permission denied", "no permissions") && host[FactAppArmorUserns] == "1":
		return &Error{Reason: ReasonUserNSRestricted, Detail: detail}
	case userns && has("operation not permitted", "permission denied", "no permissions", "invalid argument"):
		return &Error{Reason: ReasonUserNSUnavailable, Detail: detail}
	case has("landlock"):
		if host[FactLandlockABI] == "0" || has("not available", "not supported", "function not implemented") {
			return &Error{Reason: ReasonLandlockUnavailable, Detail: detail}
		}
		return &Error{Reason: ReasonLandlockABITooOld, Detail: detail}
	case has("seccomp"):
		return &Error{Reason: ReasonSeccompUnavailable, Detail: detail}
	case has("bring lo up", "forward port", "loopback", "network", "rtnetlink", "setting up loopback"):
		return &Error{Reason: ReasonNetworkSetupFailed, Detail: detail}
	case has("mount", "bind", "tmpfs", "pivot_root", "resolve ", "open source", "can't create", "can't find source", "mask", "readonly", "devpts", "proc"):
		return &Error{Reason: ReasonMountFailed, Detail: detail}
	}
	return &Error{Reason: ReasonBoxSetupFailed, Detail: detail}
}

// classifyHost names a reason the host facts alone establish, before any box is started, or nil.
func classifyHost(engineName string, host map[string]string) *Error {
	if engineName == "bwrap" && host[FactBwrap] == "" {
		return failf(ReasonEngineMissing, "engine bwrap: bwrap is not installed (not found on PATH)")
	}
	return nil
}
