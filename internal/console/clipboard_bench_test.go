package console

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkClipboardFilter filters a full-screen redraw as an agent's UI writes it: 24-bit
// colours, cursor moves, a title, a hyperlink, text.
func BenchmarkClipboardFilter(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("\x1b[?2026h\x1b]0;agent\x07\x1b[H\x1b[2J")
	for row := 1; row <= 50; row++ {
		fmt.Fprintf(&sb, "\x1b[%d;1H\x1b[38;2;200;%d;120;48;2;10;10;10m%s\x1b[0m", row, row, strings.Repeat("text ", 30))
		sb.WriteString("\x1b]8;;https://example.org/x\x1b\\link\x1b]8;;\x1b\\")
	}
	sb.WriteString("\x1b[?2026l")
	in := []byte(sb.String())
	out := make([]byte, 0, len(in))
	b.SetBytes(int64(len(in)))
	var f ClipboardFilter
	for b.Loop() {
		out = f.Filter(out[:0], in)
	}
}
