package egress

import "errors"

// Error classes, checked with errors.Is.
var (
	// ErrBadEntry is the class of an allowlist entry ParseEntry refuses.
	ErrBadEntry = errors.New("invalid egress allowlist entry")
	// ErrBadTarget is the class of a request target that is not host:port.
	ErrBadTarget = errors.New("invalid proxy target")
)

// Stable codes of the proxy's error answers (the "code" of the JSON body, and of the record).
const (
	// CodePairingInvalid: no live pairing of this launch (missing, wrong, another launch's,
	// revoked or ended). The same string as the relay's.
	CodePairingInvalid = "pairing_invalid"
	// CodeEgressRefused: the target is not on the allowlist, or it resolves only to addresses
	// the allowlist does not grant.
	CodeEgressRefused = "egress_refused"
	// CodeUpstreamUnreachable: the target is allowed but could not be resolved or dialled.
	CodeUpstreamUnreachable = "upstream_unreachable"
	// CodeBadRequest: not a proxy request (origin-form, an unsupported scheme, a bad target).
	CodeBadRequest = "bad_request"
)

// Reasons of a refusal, in records and logs.
const (
	ReasonPairing        = "pairing"          // see CodePairingInvalid
	ReasonHostNotAllowed = "host_not_allowed" // no entry covers the host
	ReasonPortNotAllowed = "port_not_allowed" // an entry covers the host, not the port
	ReasonAddress        = "address_refused"  // every address is non-public and not granted
	ReasonResolve        = "resolve_failed"
	ReasonDial           = "dial_failed"
	ReasonBadRequest     = "bad_request"
	// ReasonRateLimited marks a summary Record of records held back by the rate limit.
	ReasonRateLimited = "rate_limited"
)
