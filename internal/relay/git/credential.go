package git

import (
	"errors"

	"github.com/agentbox/agentbox/internal/relay"
)

// errCredential is the class of every failure to obtain a git credential; its messages name
// the config key and the reason, never the secret.
var errCredential = errors.New("git credential unusable")

// newSource returns the source of the credential at config key key ("git.credentials[0]"):
// a command's output is reused for relay.DefaultCredentialTTL and dropped when the remote
// refuses it.
func newSource(key string, c Credential) *relay.CredentialSource {
	return relay.NewCredentialSource(relay.Credential{Key: key, File: c.File, Command: c.Command, Class: errCredential})
}
