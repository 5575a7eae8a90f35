package git

import "fmt"

// Stable codes of the git relay's refusals, in the access record's code field and at the end
// of the message git shows ("remote error: … [git_not_allowed]").
const (
	CodeNotAllowed         = "git_not_allowed"         // the remote is not in git.allow
	CodePushNotAllowed     = "git_push_not_allowed"    // a push outside git.pushAllow
	CodeProtocol           = "git_protocol_refused"    // not smart HTTP (dumb protocol, /objects/…)
	CodeSSHNotServed       = "git_ssh_not_served"      // an ssh-form remote no ssh broker serves
	CodeRedirectRefused    = "git_redirect_refused"    // too many hops, or a hop off its allow entry
	CodeCredentialMissing  = "git_credential_missing"  // the remote wants one and none is usable
	CodeCredentialRejected = "git_credential_rejected" // the remote refused the attached credential
	CodeRemoteUnreachable  = "git_remote_unreachable"  // the remote (or the egress endpoint) did not answer
	CodeBadRequest         = "bad_request"             // a malformed relay path
	CodePairingInvalid     = "pairing_invalid"         // no live session on the request
	CodeEgressNotSupported = "egress_not_supported"    // CONNECT or absolute-form
)

// refusal is an error the transport returns when the relay, not the remote, refuses to go on
// (a redirect off its allow entry, an unusable credential); the error handler answers it in a
// form git shows.
type refusal struct {
	status int
	code   string
	msg    string
}

func (e *refusal) Error() string { return fmt.Sprintf("%s: %s", e.code, e.msg) }
