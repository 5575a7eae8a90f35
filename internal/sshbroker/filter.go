package sshbroker

import (
	"fmt"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// Filter is an ssh agent that shows a box only the granted keys of the user's agent: List
// returns the granted keys, SignWithFlags forwards a signature to the user's agent only for a
// granted key (its flags, such as RSA SHA-2, passed on unchanged), and every other operation
// fails with ErrRefused without reaching the user's agent.
type Filter struct {
	// Agent is the user's agent. Nil means unreachable: List and SignWithFlags fail with
	// ErrUpstream.
	Agent agent.ExtendedAgent
	// Keys are the granted fingerprints (git.ssh.keys). Empty means no key is granted.
	Keys []string
}

var _ agent.ExtendedAgent = (*Filter)(nil)

func (f *Filter) granted(fp string) bool {
	for _, k := range f.Keys {
		if k == fp && fp != "" {
			return true
		}
	}
	return false
}

// List returns the granted keys the user's agent holds, in the agent's order.
func (f *Filter) List() ([]*agent.Key, error) {
	if f.Agent == nil {
		return nil, ErrUpstream
	}
	keys, err := f.Agent.List()
	if err != nil {
		return nil, fmt.Errorf("%w: list: %w", ErrUpstream, err)
	}
	out := keys[:0:0]
	for _, k := range keys {
		if f.granted(fingerprintBlob(k.Blob)) {
			out = append(out, k)
		}
	}
	return out, nil
}

// Sign is SignWithFlags without flags.
func (f *Filter) Sign(key ssh.PublicKey, data []byte) (*ssh.Signature, error) {
	return f.SignWithFlags(key, data, 0)
}

// SignWithFlags has the user's agent sign data with key if key is granted.
func (f *Filter) SignWithFlags(key ssh.PublicKey, data []byte, flags agent.SignatureFlags) (*ssh.Signature, error) {
	if key == nil || !f.granted(Fingerprint(key)) {
		return nil, ErrKeyNotGranted
	}
	if f.Agent == nil {
		return nil, ErrUpstream
	}
	sig, err := f.Agent.SignWithFlags(key, data, flags)
	if err != nil {
		return nil, fmt.Errorf("%w: sign: %w", ErrUpstream, err)
	}
	return sig, nil
}

// Add refuses: a box never adds keys to the user's agent.
func (f *Filter) Add(agent.AddedKey) error { return ErrRefused }

// Remove refuses.
func (f *Filter) Remove(ssh.PublicKey) error { return ErrRefused }

// RemoveAll refuses.
func (f *Filter) RemoveAll() error { return ErrRefused }

// Lock refuses: a box cannot lock the user out of their agent.
func (f *Filter) Lock([]byte) error { return ErrRefused }

// Unlock refuses: a box cannot unlock an agent the user locked.
func (f *Filter) Unlock([]byte) error { return ErrRefused }

// Signers refuses; callers sign through SignWithFlags.
func (f *Filter) Signers() ([]ssh.Signer, error) { return nil, ErrRefused }

// Extension refuses every extension (session-bind@openssh.com included).
func (f *Filter) Extension(string, []byte) ([]byte, error) { return nil, agent.ErrExtensionUnsupported }
