package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// visible returns s with everything that could act on a terminal instead of being shown written
// out: C0 controls other than tab and newline (a carriage return, ESC and the sequences it
// starts), DEL, C1 controls, Unicode's bidirectional overrides and isolates, and bytes that are
// not UTF-8, each as \xNN or \u{NNNN}. It is for text a box wrote (file names, file contents,
// symlink targets) printed for the user to review: a box must not be able to erase, reorder or
// hide lines of the diff a user approves. escaped reports whether anything was rewritten.
func visible(s string) (out string, escaped bool) { return escape(s, false) }

// visiblePath is visible for a name on one line of its own (a path, a drift detail): a tab or
// a newline there is escaped too, so that a name cannot forge further lines (a diff header, a
// hunk, an alert).
func visiblePath(s string) (out string, escaped bool) { return escape(s, true) }

// visibleLine is visiblePath without the report.
func visibleLine(s string) string {
	v, _ := visiblePath(s)
	return v
}

func escape(s string, oneLine bool) (out string, escaped bool) {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
			escaped = true
		case (r == '\t' || r == '\n') && !oneLine:
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\x%02x`, r)
			escaped = true
		case isBidiControl(r):
			fmt.Fprintf(&b, `\u{%04x}`, r)
			escaped = true
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String(), escaped
}

// isBidiControl reports the formatting characters that reorder how a line is displayed.
func isBidiControl(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// visibleText is visible without the report.
func visibleText(s string) string {
	v, _ := visible(s)
	return v
}
