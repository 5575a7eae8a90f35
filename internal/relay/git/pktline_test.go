package git

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestPktLine(t *testing.T) {
	var b []byte
	b, _ = AppendPkt(b, []byte("# service=git-upload-pack\n"))
	b = AppendFlush(b)
	b, _ = AppendPkt(b, nil)
	b = AppendDelim(b)
	b = AppendResponseEnd(b)
	if want := "001e# service=git-upload-pack\n0000000400010002"; string(b) != want {
		t.Fatalf("encoded %q, want %q", b, want)
	}
	r := NewPktReader(bytes.NewReader(b))
	for _, want := range []struct {
		typ     PktType
		payload string
	}{{PktData, "# service=git-upload-pack\n"}, {PktFlush, ""}, {PktData, ""}, {PktDelim, ""}, {PktResponseEnd, ""}} {
		typ, p, err := r.Next()
		if err != nil || typ != want.typ || string(p) != want.payload {
			t.Fatalf("Next = %v %q %v, want %v %q", typ, p, err, want.typ, want.payload)
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
	if _, err := AppendPkt(nil, make([]byte, MaxPktPayload+1)); !errors.Is(err, ErrPktTooLong) {
		t.Errorf("oversize payload: %v", err)
	}
	if _, err := AppendPkt(nil, make([]byte, MaxPktPayload)); err != nil {
		t.Errorf("largest payload: %v", err)
	}
	for in, want := range map[string]error{
		"0003":       ErrPktInvalid,
		"zz00":       ErrPktInvalid,
		"fff1":       ErrPktInvalid,
		"0009abc":    io.ErrUnexpectedEOF,
		"00":         io.ErrUnexpectedEOF,
		"000Aabcdef": nil, // upper-case hex is what git accepts too
	} {
		_, _, err := NewPktReader(strings.NewReader(in)).Next()
		if !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Errorf("%q: %v, want %v", in, err, want)
		}
	}
}

// TestErrAdvertisement pins the refusal git turns into "remote error: …".
func TestErrAdvertisement(t *testing.T) {
	b := errAdvertisement(ReceivePack, "no push")
	if want := "001f# service=git-receive-pack\n00000010ERR no push\n"; string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
	long := errAdvertisement(UploadPack, strings.Repeat("x", 70000))
	r := NewPktReader(bytes.NewReader(long))
	for range 3 {
		if _, _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzPktRoundTrip: whatever is encoded decodes to the same payload.
func FuzzPktRoundTrip(f *testing.F) {
	f.Add([]byte("want 0123456789abcdef0123456789abcdef01234567\n"))
	f.Add([]byte{})
	f.Add([]byte("ERR no\n"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, err := AppendPkt(nil, payload)
		if len(payload) > MaxPktPayload {
			if !errors.Is(err, ErrPktTooLong) {
				t.Fatalf("oversize payload accepted: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		typ, got, err := NewPktReader(bytes.NewReader(b)).Next()
		if err != nil || typ != PktData || !bytes.Equal(got, payload) {
			t.Fatalf("round trip: %v %q %v", typ, got, err)
		}
	})
}

// FuzzPktDecode: any input decodes without panicking, and re-encoding what was decoded gives
// back the bytes consumed (up to the case of the hex digits).
func FuzzPktDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewPktReader(bytes.NewReader(data))
		var re []byte
		for {
			typ, p, err := r.Next()
			if err != nil {
				break
			}
			switch typ {
			case PktData:
				if len(p) > MaxPktPayload {
					t.Fatalf("payload of %d bytes", len(p))
				}
				re, err = AppendPkt(re, p)
				if err != nil {
					t.Fatal(err)
				}
			case PktFlush:
				re = AppendFlush(re)
			case PktDelim:
				re = AppendDelim(re)
			case PktResponseEnd:
				re = AppendResponseEnd(re)
			}
		}
		if len(re) > len(data) || !strings.EqualFold(string(re), string(data[:len(re)])) {
			t.Fatalf("re-encoded %q is not the input's prefix %q", re, data[:min(len(re), len(data))])
		}
	})
}
