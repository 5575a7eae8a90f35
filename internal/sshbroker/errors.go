package sshbroker

import "errors"

// Error classes of the broker, checked with errors.Is.
var (
	// ErrRefused is returned for an agent operation the broker never forwards (add, remove,
	// lock, unlock, extensions, …).
	ErrRefused = errors.New("ssh agent operation refused by agentbox")
	// ErrKeyNotGranted is returned for a signature with a key outside git.ssh.keys.
	ErrKeyNotGranted = errors.New("ssh key not granted (git.ssh.keys)")
	// ErrUpstream is returned when the user's agent cannot be reached or answers badly.
	ErrUpstream = errors.New("user's ssh agent failed or is unreachable")
	// ErrNotSupported is returned on platforms without the broker.
	ErrNotSupported = errors.New("ssh broker not supported on this platform")
)
