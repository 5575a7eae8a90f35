package session

import "errors"

// Error classes of the registry, checked with errors.Is.
var (
	// ErrInvalid is the class of every refused pairing: malformed, unknown, revoked, ended,
	// expired, or out of the caller's scope. Callers answer it with 403 pairing_invalid and say
	// no more, so that an unpaired request learns nothing. It is also the cause of a session's
	// context once the session is no longer live.
	ErrInvalid = errors.New("pairing invalid")
	// ErrTooManySessions refuses a Create beyond Config.Max live sessions (sessions.max).
	ErrTooManySessions = errors.New("too many live sessions")
	// ErrClientNotAllowed refuses a Create whose client id is not in Config.AllowedClients
	// (sessions.allowedClients).
	ErrClientNotAllowed = errors.New("client not allowed")
	// ErrNotFound reports that no live session has the given id.
	ErrNotFound = errors.New("session not found")
)
