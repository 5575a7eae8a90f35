package sshbroker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// MaxFrame is the largest agent frame the broker reads (256 KiB). A longer or empty frame
// closes the connection: no legitimate list or sign request comes near it.
const MaxFrame = 256 << 10

// Message numbers of the ssh-agent protocol (draft-miller-ssh-agent) the broker speaks.
const (
	msgFailure          = 5
	msgRequestIDs       = 11
	msgIdentitiesAnswer = 12
	msgSignRequest      = 13
	msgSignResponse     = 14
)

// opNames names agent requests in log lines.
var opNames = map[byte]string{
	1: "list_v1", 3: "sign_v1", 7: "add_v1", 8: "remove_v1", 9: "remove_all_v1",
	msgRequestIDs: "list", msgSignRequest: "sign",
	17: "add", 18: "remove", 19: "remove_all", 20: "add_smartcard", 21: "remove_smartcard",
	22: "lock", 23: "unlock", 25: "add_constrained", 26: "add_smartcard_constrained", 27: "extension",
}

func opName(op byte) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return "op_" + strconv.Itoa(int(op))
}

// errFrameSize is returned by readFrame for an empty or oversized frame.
type errFrameSize struct{ n, max uint32 }

func (e *errFrameSize) Error() string {
	if e.n == 0 {
		return "empty agent frame"
	}
	return fmt.Sprintf("agent frame of %d bytes exceeds the %d-byte limit", e.n, e.max)
}

// readFrame reads one length-prefixed frame. A truncated frame returns io.EOF or
// io.ErrUnexpectedEOF; an empty or oversized one returns *errFrameSize without reading its body.
func readFrame(r io.Reader) ([]byte, error) { return readFrameMax(r, MaxFrame) }

// readFrameMax is readFrame with another limit (for the user's agent's replies).
func readFrameMax(r io.Reader, max uint32) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > max {
		return nil, &errFrameSize{n, max}
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

// frame returns body with its length prefix.
func frame(body []byte) []byte {
	out := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(out, uint32(len(body)))
	copy(out[4:], body)
	return out
}

// request is a parsed agent request. Only a sign request has fields beyond op.
type request struct {
	op    byte
	key   []byte // sign: the public key blob
	data  []byte // sign: the data to sign
	flags agent.SignatureFlags
}

// parseRequest parses a frame body. For a sign request it reads the key blob, data and flags;
// trailing bytes, or a list request with a body, are malformed.
func parseRequest(body []byte) (request, error) {
	if len(body) == 0 {
		return request{}, errors.New("empty request")
	}
	r := request{op: body[0]}
	rest := body[1:]
	switch r.op {
	case msgRequestIDs:
		if len(rest) != 0 {
			return r, errors.New("list request with a body")
		}
	case msgSignRequest:
		var ok bool
		if r.key, rest, ok = parseString(rest); !ok {
			return r, errors.New("sign request: bad key blob")
		}
		if r.data, rest, ok = parseString(rest); !ok {
			return r, errors.New("sign request: bad data")
		}
		if len(rest) != 4 {
			return r, errors.New("sign request: bad flags")
		}
		r.flags = agent.SignatureFlags(binary.BigEndian.Uint32(rest))
	}
	return r, nil
}

func parseString(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+n], b[4+n:], true
}

func appendString(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// identitiesAnswer encodes SSH_AGENT_IDENTITIES_ANSWER.
func identitiesAnswer(keys []*agent.Key) []byte {
	b := []byte{msgIdentitiesAnswer}
	b = binary.BigEndian.AppendUint32(b, uint32(len(keys)))
	for _, k := range keys {
		b = appendString(b, k.Blob)
		b = appendString(b, []byte(k.Comment))
	}
	return b
}

// signResponse encodes SSH_AGENT_SIGN_RESPONSE.
func signResponse(sig *ssh.Signature) []byte {
	return appendString([]byte{msgSignResponse}, ssh.Marshal(sig))
}

var failure = []byte{msgFailure}

// parseIdentities parses the body of SSH_AGENT_IDENTITIES_ANSWER after its message number.
func parseIdentities(b []byte) ([]*agent.Key, error) {
	if len(b) < 4 {
		return nil, errors.New("malformed identities answer")
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)/8) { // each key takes at least two length prefixes
		return nil, errors.New("malformed identities answer: too many keys")
	}
	keys := make([]*agent.Key, 0, n)
	for range n {
		blob, rest, ok := parseString(b)
		if !ok {
			return nil, errors.New("malformed identities answer: key blob")
		}
		comment, rest, ok := parseString(rest)
		if !ok {
			return nil, errors.New("malformed identities answer: comment")
		}
		b = rest
		format := ""
		if f, _, ok := parseString(blob); ok {
			format = string(f)
		}
		keys = append(keys, &agent.Key{Format: format, Blob: blob, Comment: string(comment)})
	}
	if len(b) != 0 {
		return nil, errors.New("malformed identities answer: trailing bytes")
	}
	return keys, nil
}
