package console

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestParseDetachKeys(t *testing.T) {
	tests := []struct {
		in   string
		want []byte
		bad  string // the key an error names; "" for success
	}{
		{"", []byte{0x10, 0x11}, ""},
		{"ctrl-p,ctrl-q", []byte{0x10, 0x11}, ""},
		{"CTRL-A,d", []byte{0x01, 'd'}, ""},
		{"ctrl-@,ctrl-[,ctrl-\\,ctrl-],ctrl-^,ctrl-_", []byte{0, 27, 28, 29, 30, 31}, ""},
		{"none", nil, ""},
		{"ctrl-1", nil, `"ctrl-1"`},
		{"ctrl-p,,ctrl-q", nil, `""`},
		{"alt-x", nil, `"alt-x"`},
		{"ctrl-", nil, `"ctrl-"`},
		{" ", nil, `" "`},
		{"ab", nil, `"ab"`},
		{"é", nil, `"é"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDetachKeys(tt.in)
			if tt.bad != "" {
				if !errors.Is(err, ErrBadDetachKeys) || !strings.Contains(err.Error(), tt.bad+" is not a key") {
					t.Fatalf("ParseDetachKeys(%q) = %v, %v; want an error naming %s", tt.in, got, err, tt.bad)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("ParseDetachKeys(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

// TestDetachScanner feeds keystrokes in the pieces a terminal may deliver them in.
func TestDetachScanner(t *testing.T) {
	pq := []byte{0x10, 0x11}
	tests := []struct {
		name   string
		keys   []byte
		reads  []string
		want   string // what reaches the program
		detach bool
	}{
		{"plain input", pq, []string{"hello\r"}, "hello\r", false},
		{"the sequence", pq, []string{"ab\x10\x11cd"}, "ab", true},
		{"split across reads", pq, []string{"ab\x10", "\x11"}, "ab", true},
		{"ctrl-p alone reaches the program with the next key", pq, []string{"\x10", "x"}, "\x10x", false},
		{"ctrl-p twice then ctrl-q", pq, []string{"\x10\x10\x11"}, "\x10", true},
		{"held ctrl-p is not sent before the next key", pq, []string{"a\x10"}, "a", false},
		{"one key", []byte{0x1d}, []string{"x\x1dy"}, "x", true},
		{"none", nil, []string{"\x10\x11"}, "\x10\x11", false},
		{"three keys restart", []byte{0x18, 'x', 'y'}, []string{"\x18x\x18xy"}, "\x18x", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := detachScanner{keys: tt.keys}
			var got []byte
			detached := false
			for _, r := range tt.reads {
				var det bool
				got, det = d.scan(got, []byte(r))
				if det {
					detached = true
					break
				}
			}
			if string(got) != tt.want || detached != tt.detach {
				t.Errorf("program got %q, detached %v; want %q, %v", got, detached, tt.want, tt.detach)
			}
		})
	}
}
