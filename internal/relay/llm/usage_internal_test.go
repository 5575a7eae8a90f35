package llm

import (
	"bytes"
	"testing"

	"github.com/agentbox/agentbox/internal/relay"
)

// FuzzHasUsageKey checks the quote-stepping search against bytes.Contains.
func FuzzHasUsageKey(f *testing.F) {
	for _, s := range []string{`{"usage":{}}`, `"usage"`, `"usag`, `""usage"`, `{"text":"\"usage\""}`, `usage`, ``, `"`,
		`{"usageMetadata":{}}`, `"usageMetadat`, `"usageMetadata`, `""usageMetadata"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := bytes.Contains(data, []byte(`"usage"`)) || bytes.Contains(data, []byte(`"usageMetadata"`))
		if got := hasUsageKey(data); got != want {
			t.Fatalf("hasUsageKey(%q) = %v, want %v", data, got, want)
		}
	})
}

// FuzzSSEScanner checks that how a stream is cut into reads changes nothing the scanner
// finds: the usage, and the separator an inserted event needs.
func FuzzSSEScanner(f *testing.F) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12}}}\n\n" +
		"event: content_block_delta\r\ndata: {\"delta\":{\"text\":\"hi\"}}\r\n\r\n" +
		"event: message_delta\ndata: {\"usage\":{\"output_tokens\":7}}\n\nevent: partial\ndata: {"
	f.Add([]byte(stream), uint16(1), uint16(7))
	f.Add([]byte(stream), uint16(40), uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, cut, step uint16) {
		var whole relay.Usage
		ws := &sseScanner{usage: &whole}
		ws.write(data)
		var pieces relay.Usage
		ps := &sseScanner{usage: &pieces}
		c, st := int(cut)%(len(data)+1), int(step)%64+1
		ps.write(data[:c])
		for rest := data[c:]; len(rest) > 0; {
			n := min(st, len(rest))
			ps.write(rest[:n])
			rest = rest[n:]
		}
		if whole != pieces || ws.separator() != ps.separator() || ws.inEvent != ps.inEvent {
			t.Fatalf("whole: %+v %q %v; in pieces: %+v %q %v", whole, ws.separator(), ws.inEvent, pieces, ps.separator(), ps.inEvent)
		}
	})
}

func TestSSEScannerUsage(t *testing.T) {
	var u relay.Usage
	s := &sseScanner{usage: &u}
	s.write([]byte("event: message_start\ndata: {\"message\":{\"usage\":{\"input_tokens\":12}}}\n\nevent: message_delta\ndata: {\"usa"))
	s.write([]byte("ge\":{\"output_tokens\":7}}\n\n"))
	if u.InputTokens != 12 || u.OutputTokens != 7 || s.separator() != "" {
		t.Fatalf("usage %+v, separator %q", u, s.separator())
	}
}
