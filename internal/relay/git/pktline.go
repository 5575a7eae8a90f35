package git

import (
	"errors"
	"fmt"
	"io"
)

// pkt-line framing (gitprotocol-common(5)): four hex digits giving the length of the line
// including themselves, then the payload. "0000" is a flush packet, "0001" a delimiter and
// "0002" a response end (protocol v2); "0003" is invalid.
const (
	// MaxPktLen is the largest pkt-line, length prefix included.
	MaxPktLen = 65520
	// MaxPktPayload is the largest payload of one pkt-line.
	MaxPktPayload = MaxPktLen - 4
)

// PktType is the kind of a pkt-line.
type PktType int

const (
	PktData        PktType = iota // a line with a payload (possibly empty: "0004")
	PktFlush                      // "0000"
	PktDelim                      // "0001"
	PktResponseEnd                // "0002"
)

// String names t.
func (t PktType) String() string {
	switch t {
	case PktData:
		return "data"
	case PktFlush:
		return "flush"
	case PktDelim:
		return "delim"
	case PktResponseEnd:
		return "response-end"
	}
	return fmt.Sprintf("PktType(%d)", int(t))
}

// Errors of the pkt-line codec.
var (
	// ErrPktTooLong refuses a payload longer than MaxPktPayload.
	ErrPktTooLong = errors.New("pkt-line payload too long")
	// ErrPktInvalid is the class of malformed input: a length prefix that is not four hex
	// digits, or is 0003, or exceeds MaxPktLen.
	ErrPktInvalid = errors.New("invalid pkt-line")
)

const hexDigits = "0123456789abcdef"

// AppendPkt appends payload as one pkt-line to dst.
func AppendPkt(dst, payload []byte) ([]byte, error) {
	if len(payload) > MaxPktPayload {
		return dst, fmt.Errorf("%w: %d bytes (at most %d)", ErrPktTooLong, len(payload), MaxPktPayload)
	}
	n := len(payload) + 4
	dst = append(dst, hexDigits[n>>12&0xf], hexDigits[n>>8&0xf], hexDigits[n>>4&0xf], hexDigits[n&0xf])
	return append(dst, payload...), nil
}

// AppendFlush appends a flush packet ("0000") to dst.
func AppendFlush(dst []byte) []byte { return append(dst, "0000"...) }

// AppendDelim appends a delimiter packet ("0001") to dst.
func AppendDelim(dst []byte) []byte { return append(dst, "0001"...) }

// AppendResponseEnd appends a response-end packet ("0002") to dst.
func AppendResponseEnd(dst []byte) []byte { return append(dst, "0002"...) }

// PktReader reads pkt-lines from a stream. Its zero value is not usable; use NewPktReader.
type PktReader struct {
	r   io.Reader
	buf [MaxPktLen]byte
}

// NewPktReader returns a PktReader reading from r. It reads no more from r than the packets
// it returns.
func NewPktReader(r io.Reader) *PktReader { return &PktReader{r: r} }

// Next reads the next pkt-line. The payload of a data packet is valid until the next call.
// At the end of the stream Next returns io.EOF; a stream that ends inside a packet is
// io.ErrUnexpectedEOF, and a malformed length is ErrPktInvalid.
func (p *PktReader) Next() (PktType, []byte, error) {
	if _, err := io.ReadFull(p.r, p.buf[:4]); err != nil {
		return 0, nil, err
	}
	n, ok := parseHex4(p.buf[:4])
	switch {
	case !ok:
		return 0, nil, fmt.Errorf("%w: length %q is not four hex digits", ErrPktInvalid, p.buf[:4])
	case n == 0:
		return PktFlush, nil, nil
	case n == 1:
		return PktDelim, nil, nil
	case n == 2:
		return PktResponseEnd, nil, nil
	case n == 3:
		return 0, nil, fmt.Errorf("%w: length 0003", ErrPktInvalid)
	case n > MaxPktLen:
		return 0, nil, fmt.Errorf("%w: length %d exceeds %d", ErrPktInvalid, n, MaxPktLen)
	}
	payload := p.buf[4:n]
	if _, err := io.ReadFull(p.r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return PktData, payload, nil
}

func parseHex4(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int(d)
	}
	return n, true
}

// errAdvertisement returns the body of a smart-HTTP ref advertisement for service that
// carries only git's "ERR <reason>" packet: the client stops with "remote error: <reason>"
// before it sends anything (for a push, before any pack).
func errAdvertisement(service, reason string) []byte {
	b, _ := AppendPkt(nil, []byte("# service="+service+"\n"))
	b = AppendFlush(b)
	if len(reason) > MaxPktPayload-len("ERR \n") {
		reason = reason[:MaxPktPayload-len("ERR \n")]
	}
	b, _ = AppendPkt(b, []byte("ERR "+reason+"\n"))
	return b
}
