package console

import "testing"

// TestAsksTerminal: the sequences a terminal answers on its input are told from those that only
// draw, so that the end of an attach waits for an answer only when one may come.
func TestAsksTerminal(t *testing.T) {
	for s, want := range map[string]bool{
		"\x1b[6n":               true, // cursor position report
		"text\x1b[5n":           true,
		"\x1b[c":                true, // device attributes
		"\x1b[>0c":              true,
		"\xc2\x9b6n":            true, // C1 CSI
		"\x1b]11;?\x07":         true, // background colour query
		"\x1b]10;?\x1b\\":       true,
		"\x1b[2J\x1b[H":         false,
		"\x1b[31mred\x1b[0m":    false,
		"\x1b]2;title\x07":      false,
		"\x1b]11;#000000\x07":   false,
		"plain text, no escape": false,
	} {
		if got := asksTerminal([]byte(s)); got != want {
			t.Errorf("asksTerminal(%q) = %v, want %v", s, got, want)
		}
	}
}
