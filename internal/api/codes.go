package api

// Stable error codes: the one table of the codes agentbox answers with, on the local API and
// in the brokers' answers and records (the LLM relay, the git relay, the egress proxy), and of
// box start-up (the engine's and the shim's). Each string is declared here only; other
// packages use these constants (or alias them, as engine and shim do for their own names).
// Status maps the local API's codes to HTTP statuses; a broker chooses its own status.
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

	// CodeUnknownEngine: no engine of that name is registered.
	CodeUnknownEngine = "unknown_engine"
	// CodeEngineUnsupported: the engine cannot run on this platform.
	CodeEngineUnsupported = "engine_not_supported"
	// CodeAttachTimeout: an attached launch saw no client within the shim's attach timeout;
	// the box was never started.
	CodeAttachTimeout = "attach_timeout"
	// CodeStoppedBeforeStart: a stop request arrived before the box was started.
	CodeStoppedBeforeStart = "stopped_before_start"
	// CodeBoxExitedBeforeExec: the box ended before its program was exec'd without saying why.
	CodeBoxExitedBeforeExec = "box_exited_before_exec"
)

// Codes of the brokers' own answers (the relay, the git relay, the egress proxy), besides
// the shared ones above (bad_request, not_found, pairing_invalid: no live pairing of this
// launch — missing, wrong, another launch's, revoked or ended —, egress_not_supported:
// CONNECT or an absolute-form request to a relay).
const (
	// CodeGatewayCredentialMissing: the daemon has no usable gateway credential (LLM relay).
	CodeGatewayCredentialMissing = "gateway_credential_missing"
	// CodeGatewayCredentialRejected: the gateway refused the credential the daemon attached.
	CodeGatewayCredentialRejected = "gateway_credential_rejected"
	// CodeGatewayPathRefused: the LLM relay forwards no request of that method and path
	// (its provider's inference endpoints and gateway.<provider>.allow only).
	CodeGatewayPathRefused = "gateway_path_refused"
	// CodeGatewayToolRefused: a model call declares a server-side tool (web search, URL
	// fetching, an MCP server, code execution: the provider runs it, reaching any host) that
	// gateway.<provider>.serverTools does not allow.
	CodeGatewayToolRefused = "gateway_tool_refused"
	// CodeGatewayUnreachable: the gateway did not answer.
	CodeGatewayUnreachable = "gateway_unreachable"
	// CodeTooManyConnections: a broker listener or the daemon holds the most connections it
	// may (the daemon answers it before reading a request).
	CodeTooManyConnections = "too_many_connections"

	// The git relay's refusals, in the access record's code field and at the end of the
	// message git shows ("remote error: … [git_not_allowed]").
	CodeGitNotAllowed         = "git_not_allowed"         // the remote is not in git.allow
	CodeGitPushNotAllowed     = "git_push_not_allowed"    // a push outside git.pushAllow
	CodeGitProtocolRefused    = "git_protocol_refused"    // not smart HTTP (dumb protocol, /objects/…)
	CodeGitSSHNotServed       = "git_ssh_not_served"      // an ssh-form remote no ssh broker serves
	CodeGitRedirectRefused    = "git_redirect_refused"    // too many hops, or a hop off its allow entry
	CodeGitCredentialMissing  = "git_credential_missing"  // the remote wants one and none is usable
	CodeGitCredentialRejected = "git_credential_rejected" // the remote refused the attached credential
	CodeGitRemoteUnreachable  = "git_remote_unreachable"  // the remote (or the egress endpoint) did not answer

	// CodeEgressRefused: the egress proxy's target is not on the allowlist, or it resolves
	// only to addresses the allowlist does not grant.
	CodeEgressRefused = "egress_refused"
	// CodeUpstreamUnreachable: the egress proxy's target is allowed but could not be resolved
	// or dialled.
	CodeUpstreamUnreachable = "upstream_unreachable"
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
