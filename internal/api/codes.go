package api

// Stable error codes.
const (
	CodeBadRequest         = "bad_request"
	CodeNotFound           = "not_found"
	CodeForbidden          = "forbidden"
	CodeWorkspaceRefused   = "workspace_refused"
	CodeProgramNotFound    = "program_not_found"
	CodeProgramNotExec     = "program_not_executable"
	CodeBoxSetupFailed     = "box_setup_failed"
	CodeBoxUnavailable     = "box_unavailable"
	CodeStoreFailed        = "store_failed"
	CodeConfigInvalid      = "config_invalid"
	CodeInternal           = "internal"
	CodeDaemonUnreachable  = "daemon_unreachable"
	CodeLaunchDirConflict  = "launch_dir_conflict"
	CodeStateOwnedByOther  = "state_owned_by_other_user"
	CodeEgressNotSupported = "egress_not_supported"
	CodeTooManySessions    = "too_many_sessions"
	CodePairingInvalid     = "pairing_invalid"
	// CodeArgumentDenied: an argument the program's profile refuses (a network listener, a
	// flag that would bypass the pinned configuration).
	CodeArgumentDenied = "argument_denied"
	// CodePreconditionFailed: something the program's profile requires does not hold (a model,
	// a gateway provider, egress deny, the relay); the hint names the config key to set.
	CodePreconditionFailed = "precondition_failed"
	// CodeConfigLocked: a per-run flag or a launcher asked to change a key the system policy
	// sets (locks).
	CodeConfigLocked = "config_locked"
	// CodeLaunchDetached: attach to a launch without a console (started with --detach
	// without a terminal).
	CodeLaunchDetached = "launch_detached"
	// CodeChangeConflict: a proposed change was not applied because the host has something at
	// its path now (made while or after the box ran); nothing was overwritten.
	CodeChangeConflict = "change_conflict"
)

// HTTP statuses the API answers with (net/http's values; this package does not import
// net/http, so that the small box helper, which uses these types, does not link an HTTP
// stack).
const (
	statusBadRequest          = 400
	statusForbidden           = 403
	statusNotFound            = 404
	statusConflict            = 409
	statusTooManyRequests     = 429
	statusInternalServerError = 500
	statusServiceUnavailable  = 503
)

// Status returns the HTTP status for an error code.
func Status(code string) int {
	switch code {
	case CodeBadRequest, CodeArgumentDenied, CodeWorkspaceRefused, CodeProgramNotFound, CodeProgramNotExec, CodeConfigInvalid:
		return statusBadRequest
	case CodeNotFound:
		return statusNotFound
	case CodeForbidden, CodeEgressNotSupported, CodeStateOwnedByOther, CodePairingInvalid, CodeConfigLocked:
		return statusForbidden
	case CodeTooManySessions:
		return statusTooManyRequests
	case CodeBoxUnavailable:
		return statusServiceUnavailable
	case CodeLaunchDirConflict, CodePreconditionFailed, CodeLaunchDetached, CodeChangeConflict:
		return statusConflict
	}
	return statusInternalServerError
}
