package llm

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/relay"
)

// Defaults applied to zero Credential fields.
const (
	DefaultCredentialTTL     = relay.DefaultCredentialTTL
	DefaultCredentialTimeout = relay.DefaultCredentialTimeout
)

// errCredential is the class of every failure to obtain the gateway credential.
var errCredential = errors.New("gateway credential missing")

// Credential says where the daemon finds a gateway's credential, host-side. Exactly one of
// File and Command is set; with neither, requests are refused with 401
// gateway_credential_missing.
type Credential struct {
	// File is a file holding the credential (credential.file). It must be a regular file
	// owned by the daemon's user and not readable by others (mode 0600 or stricter). It is
	// looked at (stat) at every request and read again whenever it changed, so a rotated
	// credential takes effect at once.
	File string
	// Command is a program and its arguments (credential.command; no shell) whose standard
	// output is the credential.
	Command []string
	// TTL is how long a Command's output is reused (credential.ttl). Zero means
	// DefaultCredentialTTL; negative runs the command for every request. An upstream 401
	// drops the cached value.
	TTL time.Duration
	// Timeout bounds one run of Command. Zero means DefaultCredentialTimeout.
	Timeout time.Duration
	// Header is the header that carries the credential upstream (credential.header): a name
	// ("x-api-key"), or a name and a value prefix ("Authorization: Bearer"). Zero means
	// "x-api-key" for anthropic, "Authorization: Bearer" for openai and "x-goog-api-key" for
	// gemini.
	Header string
}

// parseHeader splits "Name" or "Name: Prefix" into the header name and the value prefix
// (with its trailing space).
func parseHeader(h string) (name, prefix string, err error) {
	name, prefix, _ = strings.Cut(h, ":")
	name, prefix = strings.TrimSpace(name), strings.TrimSpace(prefix)
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	}) {
		return "", "", fmt.Errorf("header %q is not a valid header name", h)
	}
	if strings.ContainsFunc(prefix, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", "", fmt.Errorf("header %q has control characters", h)
	}
	if prefix != "" {
		prefix += " "
	}
	return name, prefix, nil
}

// racyNow is the clock credential file times are compared with (a variable for the tests).
var racyNow = time.Now

// newSource returns the source of gateway key's credential c ("gateway.anthropic").
func newSource(key string, c Credential, now func() time.Time) *relay.CredentialSource {
	return relay.NewCredentialSource(relay.Credential{Key: key + ".credential", File: c.File, Command: c.Command,
		TTL: c.TTL, Timeout: c.Timeout, Class: errCredential, Now: now, FileClock: func() time.Time { return racyNow() }})
}
