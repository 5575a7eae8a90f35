package console

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultDetachKeys is the detach key sequence when none is configured: Ctrl-P Ctrl-Q, as
// docker's.
const DefaultDetachKeys = "ctrl-p,ctrl-q"

// DetachKeysNone turns the detach keys off: every key reaches the program.
const DetachKeysNone = "none"

// ErrBadDetachKeys is the class of ParseDetachKeys's refusals (a *DetachKeysError).
var ErrBadDetachKeys = errors.New("invalid detach keys")

// DetachKeysError is a detach-key sequence ParseDetachKeys cannot read; it unwraps to
// ErrBadDetachKeys.
type DetachKeysError struct {
	Keys string // the sequence as written
	Key  string // the element that is not a key
}

func (e *DetachKeysError) Error() string { return ErrBadDetachKeys.Error() + " " + e.Detail() }
func (e *DetachKeysError) Unwrap() error { return ErrBadDetachKeys }

// Detail says what is wrong and how keys are written, naming the sequence (the message
// without the class, for a caller that names the setting itself).
func (e *DetachKeysError) Detail() string {
	return fmt.Sprintf("%q: %q is not a key (each key is one printable character or ctrl-<a-z, @, [, \\, ], ^ or _>, separated by commas, e.g. %s; %q turns them off)",
		e.Keys, e.Key, DefaultDetachKeys, DetachKeysNone)
}

// ParseDetachKeys parses a detach key sequence (docker's format): keys separated by commas,
// each a single printable character or ctrl-X, where X is a letter or one of @ [ \ ] ^ _.
// "" means DefaultDetachKeys; "none" gives nil (no detach keys). The result is the bytes the
// terminal sends for the sequence.
func ParseDetachKeys(s string) ([]byte, error) {
	switch s {
	case "":
		s = DefaultDetachKeys
	case DetachKeysNone:
		return nil, nil
	}
	var out []byte
	for _, k := range strings.Split(s, ",") {
		b, ok := parseKey(k)
		if !ok {
			return nil, &DetachKeysError{Keys: s, Key: k}
		}
		out = append(out, b)
	}
	return out, nil
}

func parseKey(k string) (byte, bool) {
	if len(k) == 1 && k[0] > ' ' && k[0] < 0x7f {
		return k[0], true
	}
	rest, ok := strings.CutPrefix(strings.ToLower(k), "ctrl-")
	if !ok || len(rest) != 1 {
		return 0, false
	}
	switch c := rest[0]; {
	case c >= 'a' && c <= 'z':
		return c - 'a' + 1, true
	case c == '@':
		return 0, true
	case c >= '[' && c <= '_': // [ \ ] ^ _
		return c - '[' + 27, true
	}
	return 0, false
}

// detachScanner finds a detach key sequence in a terminal's input. Bytes that may begin the
// sequence are held back until the next byte shows whether they do (as docker does): a lone
// Ctrl-P reaches the program with the key after it.
type detachScanner struct {
	keys    []byte
	matched int
}

// scan appends to dst what of in goes to the program and reports whether the sequence was
// completed; the bytes after the sequence are dropped (the client detaches).
func (d *detachScanner) scan(dst, in []byte) ([]byte, bool) {
	if len(d.keys) == 0 {
		return append(dst, in...), false
	}
	for _, b := range in {
		if b == d.keys[d.matched] {
			d.matched++
			if d.matched == len(d.keys) {
				d.matched = 0
				return dst, true
			}
			continue
		}
		if d.matched > 0 {
			// Not the sequence after all: what was held back goes to the program, and b may
			// begin the sequence anew.
			dst = append(dst, d.keys[:d.matched]...)
			d.matched = 0
			if b == d.keys[0] {
				d.matched = 1
				if len(d.keys) == 1 {
					d.matched = 0
					return dst, true
				}
				continue
			}
		}
		dst = append(dst, b)
	}
	return dst, false
}
