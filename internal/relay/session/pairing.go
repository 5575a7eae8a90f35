package session

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"strings"
)

const (
	// PairingPrefix starts every pairing, so that log scrubbers and people recognise one.
	PairingPrefix = "abp_"
	// HeaderName is the header that carries a pairing when neither x-api-key nor
	// Authorization can (the git relay's extraHeader, for one).
	HeaderName = "X-Agentbox-Pairing"

	pairingBytes = 32
	pairingLen   = len(PairingPrefix) + 43 // base64url of 32 bytes, unpadded
	redacted     = PairingPrefix + "[redacted]"
)

// Pairing is the bearer secret of a session: PairingPrefix followed by 32 random bytes in
// unpadded base64url. Only Registry.Create returns one, once; the registry keeps its SHA-256
// hash. Printing or encoding a Pairing (fmt, log/slog, encoding/json) shows a redacted
// placeholder; Reveal returns
// the value, for the one place it is handed over (the box's environment or gitconfig, the
// answer to `agentbox session create`).
type Pairing string

// Reveal returns the pairing's value. It is the only way to get it.
func (p Pairing) Reveal() string { return string(p) }

// String returns a redacted placeholder, never the value.
func (p Pairing) String() string { return redacted }

// GoString returns a redacted placeholder, never the value.
func (p Pairing) GoString() string { return "session.Pairing(" + redacted + ")" }

// LogValue returns a redacted placeholder, never the value.
func (p Pairing) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText returns a redacted placeholder, never the value, so that a Pairing in a struct
// that is logged or encoded stays secret. Hand the value over with Reveal.
func (p Pairing) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Hash is the SHA-256 of a pairing's text, the only form in which a pairing is stored.
type Hash [sha256.Size]byte

// String returns the hash in hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// HashOf returns the hash of pairing p.
func HashOf(p string) Hash { return sha256.Sum256([]byte(p)) }

// WellFormed reports whether s has the shape of a pairing (prefix and length). It says
// nothing about whether the pairing is live.
func WellFormed(s string) bool {
	if len(s) != pairingLen || !strings.HasPrefix(s, PairingPrefix) {
		return false
	}
	for i := len(PairingPrefix); i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func newPairing() (Pairing, Hash) {
	var b [pairingBytes]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	p := PairingPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return Pairing(p), HashOf(p)
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return "s_" + hex.EncodeToString(b[:])
}
