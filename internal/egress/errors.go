package egress

import (
	"errors"
	"fmt"
)

// EntryError is an allowlist entry ParseEntry refuses; it unwraps to ErrBadEntry.
type EntryError struct {
	Entry  string // the entry as written
	Reason string // why it is refused
}

func (e *EntryError) Error() string { return fmt.Sprintf("%s: %q: %s", ErrBadEntry, e.Entry, e.Reason) }
func (e *EntryError) Unwrap() error { return ErrBadEntry }

// Error classes, checked with errors.Is.
var (
	// ErrBadEntry is the class of an allowlist entry ParseEntry refuses (an *EntryError).
	ErrBadEntry = errors.New("invalid egress allowlist entry")
	// ErrBadTarget is the class of a request target that is not host:port.
	ErrBadTarget = errors.New("invalid proxy target")
)

// Reasons of a refusal, in records and logs.
const (
	ReasonPairing        = "pairing"          // see api.CodePairingInvalid
	ReasonHostNotAllowed = "host_not_allowed" // no entry covers the host
	ReasonPortNotAllowed = "port_not_allowed" // an entry covers the host, not the port
	ReasonAddress        = "address_refused"  // every address is non-public and not granted
	ReasonResolve        = "resolve_failed"
	ReasonDial           = "dial_failed"
	ReasonBadRequest     = "bad_request"
	// ReasonRateLimited marks a summary Record of records held back by the rate limit.
	ReasonRateLimited = "rate_limited"
)
