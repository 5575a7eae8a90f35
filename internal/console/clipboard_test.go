package console

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// termModel is a reference terminal parser used to judge the filter's output: a UTF-8 decoder
// followed by the DEC/ECMA-48 state machine, far enough to see every OSC the terminal would act
// on. It is deliberately more gullible than a real terminal where terminals differ: it can drop
// invalid UTF-8 silently (as some decoders do) and it ignores DEL inside an OSC number.
type termModel struct {
	dropInvalid bool

	state  int
	digits int
	val    uint32 // wraps like a careless int parser
	exact  uint64
	// clip lists what the terminal saw that the filter must drop: OSCs outside ScreenOSC (their
	// numbers), control strings, window operations other than the title stack's (CSI … t) and
	// hyperlinks to anything but http and https.
	clip []string

	csi []byte // the parameter and intermediate bytes of the CSI being read
	osc uint64 // the number of the OSC whose string is being read
	str []rune // that string
}

const (
	tGround = iota
	tEscape
	tEscInter
	tCSI
	tOSCParam
	tOSCString
	tString // DCS, SOS, PM, APC
)

func (m *termModel) feed(b []byte) {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			n = 1
			if m.dropInvalid {
				b = b[n:]
				continue
			}
			r = utf8.RuneError
		}
		b = b[n:]
		m.rune(r)
	}
}

// endParam records an OSC whose number (as a careless or an exact parser reads it) is not one
// that only acts on the screen.
func (m *termModel) endParam() {
	if m.digits > 0 && (!slices.Contains(ScreenOSC, uint64(m.val)) || !slices.Contains(ScreenOSC, m.exact)) {
		m.clip = append(m.clip, fmt.Sprint(m.val))
	}
}

// startString records a DCS, SOS, PM or APC string, none of which may reach the terminal.
func (m *termModel) startString() {
	m.state = tString
	m.clip = append(m.clip, "control string")
}

// endCSI records a window operation (CSI … t) that is not a push or pop of the title stack.
func (m *termModel) endCSI(final rune) {
	if final != 't' {
		return
	}
	first, rest, _ := strings.Cut(string(m.csi), ";")
	first = strings.TrimLeft(first, "0")
	if (first != "22" && first != "23") || strings.Trim(rest, "0123456789") != "" {
		m.clip = append(m.clip, fmt.Sprintf("CSI %st", m.csi))
	}
}

// endString records a hyperlink (OSC 8 ; params ; URI) whose URI is neither http nor https. It
// is called however the string ends (BEL, ST, ESC, CAN, …): a gullible terminal acts on it.
func (m *termModel) endString() {
	if m.osc != 8 {
		return
	}
	_, uri, ok := strings.Cut(string(m.str), ";")
	lower := strings.ToLower(uri)
	if ok && uri != "" && !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
		m.clip = append(m.clip, "OSC 8 "+uri)
	}
}

func (m *termModel) rune(r rune) {
	if m.state == tOSCString && (r == 0x07 || r == 0x18 || r == 0x1a || r == 0x1b || r >= 0x90 && r <= 0x9f) {
		m.endString()
	}
	// Transitions from anywhere.
	switch {
	case r == 0x18 || r == 0x1a:
		if m.state == tOSCParam {
			m.endParam()
		}
		m.state = tGround
		return
	case r == 0x1b:
		if m.state == tOSCParam {
			m.endParam()
		}
		m.state = tEscape
		return
	case r == 0x9c: // ST
		if m.state == tOSCParam {
			m.endParam()
		}
		m.state = tGround
		return
	case r == 0x9d:
		m.state, m.digits, m.val, m.exact = tOSCParam, 0, 0, 0
		return
	case r == 0x9b:
		m.state, m.csi = tCSI, nil
		return
	case r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f:
		m.startString()
		return
	}
	switch m.state {
	case tEscape:
		switch {
		case r < 0x20 || r == 0x7f:
			// executed or ignored; still in escape
		case r >= 0x20 && r <= 0x2f:
			m.state = tEscInter
		case r == ']':
			m.state, m.digits, m.val, m.exact = tOSCParam, 0, 0, 0
		case r == '[':
			m.state, m.csi = tCSI, nil
		case r == 'P' || r == 'X' || r == '^' || r == '_':
			m.startString()
		default:
			m.state = tGround
		}
	case tEscInter:
		if r >= 0x30 && r <= 0x7e || r >= 0x80 {
			m.state = tGround
		}
	case tCSI:
		switch {
		case r >= 0x40 && r <= 0x7e:
			m.endCSI(r)
			m.state = tGround
		case r >= 0x80:
			m.state = tGround
		case r >= 0x20:
			m.csi = append(m.csi, byte(r))
		}
	case tOSCParam:
		switch {
		case r >= '0' && r <= '9':
			m.digits++
			m.val = m.val*10 + uint32(r-'0')
			if m.exact < 1<<60 {
				m.exact = m.exact*10 + uint64(r-'0')
			}
		case r == 0x07:
			m.endParam()
			m.state = tGround
		case r < 0x20 || r == 0x7f:
			// ignored
		default:
			m.endParam()
			m.state, m.osc, m.str = tOSCString, m.exact, nil
			if r != ';' {
				m.osc = 0 // not a hyperlink's syntax
			}
		}
	case tOSCString:
		switch {
		case r == 0x07:
			m.state = tGround
		case r >= 0x20 && r != 0x7f:
			m.str = append(m.str, r)
		}
	}
}

// clipboardSeen reports the clipboard OSCs a terminal would see in out, under both decoders.
func clipboardSeen(out []byte) []string {
	var seen []string
	for _, drop := range []bool{false, true} {
		m := termModel{dropInvalid: drop}
		m.feed(out)
		seen = append(seen, m.clip...)
	}
	return seen
}

func isSubsequence(sub, s []byte) bool {
	i := 0
	for j := 0; j < len(s) && i < len(sub); j++ {
		if s[j] == sub[i] {
			i++
		}
	}
	return i == len(sub)
}

func filterAll(in []byte) []byte {
	var f ClipboardFilter
	return f.Filter(nil, in)
}

func TestClipboardModelSeesRawSequences(t *testing.T) {
	// The reference model must catch the raw attacks, or the tests below prove nothing.
	for _, in := range []string{
		"\x1b]52;c;Zm9v\x07",
		"\x1b]52;c;Zm9v\x1b\\",
		"\xc2\x9d52;c;Zm9v\xc2\x9c",
		"\x1b\n]52;c;Zm9v\x07",
		"\x1b]0052;c;Zm9v\x07",
		"\x1b]5\x002;c;Zm9v\x07",
		"\x1b]5522;write=x\x07",
		"\x1b]4294967348;c;Zm9v\x07",
		"\x1b[21t", "\x1b[20t", "\x1b[14t", "\x1b[8;1;1t", "\xc2\x9b21t", "\x1b[2\n1t",
		"\x1b]8;;file:///etc/passwd\x1b\\", "\x1b]8;id=1;ssh://h\x07", "\x1b]8;;fi\x01le:/x\x07",
	} {
		if len(clipboardSeen([]byte(in))) == 0 {
			t.Errorf("model misses %q", in)
		}
	}
}

func TestClipboardFilter(t *testing.T) {
	const payload = "c;SGVsbG8="
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello, world\n", "hello, world\n"},
		{"bel", "a\x1b]52;" + payload + "\x07b", "ab"},
		{"st", "a\x1b]52;" + payload + "\x1b\\b", "ab"},
		{"c1", "a\xc2\x9d52;" + payload + "\xc2\x9cb", "ab"},
		{"c1 bel", "a\xc2\x9d52;" + payload + "\x07b", "ab"},
		{"query", "a\x1b]52;c;?\x07b", "ab"},
		{"no payload", "a\x1b]52\x07b", "ab"},
		{"leading zeros", "a\x1b]00052;" + payload + "\x07b", "ab"},
		{"c0 in escape", "a\x1b\x00\n]52;" + payload + "\x07b", "ab"},
		{"c0 in number", "a\x1b]5\x002;" + payload + "\x07b", "ab"},
		{"kitty 5522", "a\x1b]5522;type=write\x07b", "ab"},
		{"overflow", "a\x1b]4294967348;" + payload + "\x07b", "ab"},
		{"two in a row", "\x1b]52;" + payload + "\x07\x1b]52;" + payload + "\x1b\\x", "x"},
		{"cancelled", "a\x1b]52;" + payload + "\x18b", "ab"},
		{"aborted by escape", "a\x1b]52;" + payload + "\x1b[1mb", "a\x1b[1mb"},
		{"utf8 payload", "a\x1b]52;c;\xc2\xa9\x07b", "ab"},
		{"tmux passthrough", "\x1bPtmux;\x1b\x1b]52;" + payload + "\x07\x1b\\x", "\x1b\\x"},
		// Issue 21, finding 4: an allowlist, not a list of clipboard numbers.
		{"iterm2 copy", "a\x1b]1337;Copy=;" + payload + "\x07b", "ab"},
		{"iterm2 file", "a\x1b]1337;File=name=eA==;inline=0:" + payload + "\x1b\\b", "ab"},
		{"notification 9", "a\x1b]9;you have mail\x07b", "ab"},
		{"notification 777", "a\x1b]777;notify;title;body\x07b", "ab"},
		{"kitty notification 99", "a\x1b]99;;hello\x1b\\b", "ab"},
		{"kitty file transfer 5113", "a\x1b]5113;ac=send;id=1\x1b\\b", "ab"},
		{"working folder 7", "a\x1b]7;file://host/etc\x07b", "ab"},
		{"dcs query", "a\x1bP+q544e\x1b\\b", "ab"},
		{"dcs sixel", "a\x1bPq#0;2;0;0;0#0~~\x1b\\b", "ab"},
		{"apc kitty graphics file", "a\x1b_Gf=100,t=f;L2V0Yy9zaGFkb3c=\x1b\\b", "ab"},
		{"c1 dcs", "a\xc2\x90+q544e\xc2\x9cb", "ab"},
		{"c1 apc", "a\xc2\x9fGt=f;eA==\xc2\x9cb", "ab"},
		{"sos and pm", "a\x1bXx\x1b\\\x1b^y\x1b\\b", "ab"},
		{"osc 5 dropped", "\x1b]5;1;red\x07", ""},
		{"osc 53 dropped", "\x1b]53;x\x07", ""},
		{"osc 520 dropped", "\x1b]520;x\x07", ""},
		{"background query kept", "\x1b]11;?\x1b\\x", "\x1b]11;?\x1b\\x"},
		{"palette kept", "\x1b]4;1;rgb:ff/00/00\x07x", "\x1b]4;1;rgb:ff/00/00\x07x"},
		{"prompt mark kept", "\x1b]133;A\x07x", "\x1b]133;A\x07x"},
		{"empty number kept", "\x1b];t\x07x", "\x1b];t\x07x"},
		{"alternate screen and bracketed paste kept", "\x1b[?1049h\x1b[?2004h\x1b[?1000h\x1b[?1006h\x1b[?2026h\x1b[2J\x1b[H\x1b[?25l", "\x1b[?1049h\x1b[?2004h\x1b[?1000h\x1b[?1006h\x1b[?2026h\x1b[2J\x1b[H\x1b[?25l"},
		{"title kept", "\x1b]0;my title\x07x", "\x1b]0;my title\x07x"},
		{"title st kept", "\x1b]2;t\x1b\\x", "\x1b]2;t\x1b\\x"},
		{"hyperlink kept", "\x1b]8;;http://e.org\x1b\\link\x1b]8;;\x1b\\", "\x1b]8;;http://e.org\x1b\\link\x1b]8;;\x1b\\"},
		{"reset colors kept", "\x1b]104\x1b\\x", "\x1b]104\x1b\\x"},
		{"reset colors c1 st kept", "\x1b]104\xc2\x9cx", "\x1b]104\xc2\x9cx"},
		{"csi kept", "\x1b[31mred\x1b[0m", "\x1b[31mred\x1b[0m"},
		{"esc seven kept", "\x1b7\x1b8", "\x1b7\x1b8"},
		{"utf8 with 9d kept", "ŝ中文 \xe2\x80\x9d", "ŝ中文 \xe2\x80\x9d"},
		{"c1 csi kept", "\xc2\x9b31m", "\xc2\x9b31m"},
		{"latin1 kept", "\xc2\xa9 caf\xc3\xa9", "\xc2\xa9 caf\xc3\xa9"},
		{"bracket without esc kept", "]52;c;x\x07", "]52;c;x\x07"},
		{"esc esc", "\x1b\x1b[1m", "\x1b[1m"},
		{"esc non-ascii", "\x1b\xc3\xa9", "\xc3\xa9"},
		{"c2 before esc", "\xc2\x1b[1m", "\x1b[1m"},
		{"weird number dropped", "a\x1b]5x2;c;x\x07b", "ab"},
		// Regressions for attacks that straddle a dropped sequence: the bytes emitted before the
		// drop must not combine with the bytes after it.
		{"straddle param", "\x1b]5\x1b\x1b]52;c;x\x07" + "2;c;QUFB\x07", "2;c;QUFB\x07"},
		{"straddle param c2", "\x1b]5\xc2\x1b]52;c;x\x07" + "2;c;QUFB\x07", "2;c;QUFB\x07"},
		{"straddle escape", "\x1b\x1b]52;c;x\x07]52;c;QUFB\x07", "]52;c;QUFB\x07"},
		{"straddle c2", "\xc2\x1b]52;c;x\x07\x9d52;c;QUFB\x07", "\x9d52;c;QUFB\x07"},
		{"param then esc then title", "\x1b]5\x1b]0;t\x07", "\x1b]0;t\x07"},
		// Review finding 6: window reports make the terminal type a reply (20t/21t: a title the
		// program set) into the input; only the title stack's push and pop pass.
		{"title report 21t", "a\x1b]2;;touch /tmp/pwn\x07\x1b[21tb", "a\x1b]2;;touch /tmp/pwn\x07b"},
		{"icon label report 20t", "a\x1b[20tb", "ab"},
		{"window reports", "a\x1b[11t\x1b[13t\x1b[14t\x1b[14;2t\x1b[15t\x1b[16t\x1b[18t\x1b[19tb", "ab"},
		{"window moves and resizes", "a\x1b[1t\x1b[2t\x1b[3;0;0t\x1b[4;1;1t\x1b[8;1;1t\x1b[9;1t\x1b[10;1t\x1b[48tb", "ab"},
		{"window op default", "a\x1b[tb", "ab"},
		{"report with leading zeros", "a\x1b[0021tb", "ab"},
		{"report with c0 inside", "a\x1b[2\r1tb", "ab"},
		{"c1 report", "a\xc2\x9b21tb", "ab"},
		{"title modes and bell volume", "a\x1b[>0;1t\x1b[1 tb", "ab"},
		{"title stack kept", "\x1b[22;0t\x1b[22t\x1b[23;0t\x1b[023t", "\x1b[22;0t\x1b[22t\x1b[23;0t\x1b[023t"},
		{"csi aborted by can", "a\x1b[21\x18b", "a\x18b"},
		{"csi aborted by esc", "a\x1b[21\x1b[1mb", "a\x1b[1mb"},
		{"csi cursor report kept", "\x1b[6n\x1b[c", "\x1b[6n\x1b[c"},
		{"truecolor sgr kept", "\x1b[38;2;255;255;255;48;2;0;0;0;1;3;4mx", "\x1b[38;2;255;255;255;48;2;0;0;0;1;3;4mx"},
		// OSC 8 hyperlinks only to http and https; the link text stays.
		{"file link dropped", "\x1b]8;;file:///etc/passwd\x1b\\click\x1b]8;;\x1b\\", "click\x1b]8;;\x1b\\"},
		{"ssh link with id dropped", "\x1b]8;id=7;ssh://host/x\x07click\x1b]8;;\x07", "click\x1b]8;;\x07"},
		{"c1 link dropped", "\xc2\x9d8;;file:/x\xc2\x9cclick", "click"},
		{"scheme-less link dropped", "\x1b]8;;/etc/passwd\x07x", "x"},
		{"almost http dropped", "\x1b]8;;http:/x\x07\x1b]8;;htt\x07\x1b]8;;httpx://\x07x", "x"},
		{"c0 in scheme dropped", "\x1b]8;;ht\x01tp://e.org\x07x", "x"},
		{"link without uri part dropped", "\x1b]8;id=1\x07x", "x"},
		{"cancelled link", "\x1b]8;;\x18x", "x"},
		{"https link with id kept", "\x1b]8;id=a:b;HTTPS://e.org/?q=1;2\x1b\\t\x1b]8;;\x1b\\", "\x1b]8;id=a:b;HTTPS://e.org/?q=1;2\x1b\\t\x1b]8;;\x1b\\"},
		{"link end c1 st kept", "\x1b]8;;\xc2\x9cx", "\x1b]8;;\xc2\x9cx"},
		{"review finding 6", "\x1b]2;;touch /tmp/pwn\x07\x1b[21t\x1b]8;;file:///etc/passwd\x1b\\click\x1b]8;;\x1b\\\x1b]11;?\x07\x1b[6n",
			"\x1b]2;;touch /tmp/pwn\x07click\x1b]8;;\x1b\\\x1b]11;?\x07\x1b[6n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := filterAll([]byte(tt.in))
			if string(got) != tt.want {
				t.Errorf("Filter(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if seen := clipboardSeen(got); len(seen) > 0 {
				t.Errorf("terminal would see clipboard OSC %v in %q", seen, got)
			}
			// Every split point gives the same output: sequences split across reads are caught.
			for i := 0; i <= len(tt.in); i++ {
				var f ClipboardFilter
				out := f.Filter(nil, []byte(tt.in[:i]))
				out = f.Filter(out, []byte(tt.in[i:]))
				if !bytes.Equal(out, got) {
					t.Fatalf("split at %d: %q, unsplit %q", i, out, got)
				}
			}
			// Byte by byte.
			var f ClipboardFilter
			var out []byte
			for i := 0; i < len(tt.in); i++ {
				out = f.Filter(out, []byte{tt.in[i]})
			}
			if !bytes.Equal(out, got) {
				t.Fatalf("byte by byte: %q, want %q", out, got)
			}
		})
	}
}

func TestClipboardFilterHeldAtEnd(t *testing.T) {
	// An undecided sequence at the end of a write is held, not emitted, and Reset discards it.
	var f ClipboardFilter
	if out := f.Filter(nil, []byte("ab\x1b]5")); string(out) != "ab" {
		t.Fatalf("got %q, want %q", out, "ab")
	}
	f.Reset()
	if out := f.Filter(nil, []byte("2;c;QUFB\x07")); string(out) != "2;c;QUFB\x07" {
		t.Fatalf("after Reset got %q", out)
	}
}

func TestClipboardFilterLongSequences(t *testing.T) {
	// A long payload is dropped entirely, and a flood of ignorable bytes inside an escape does
	// not grow memory without bound.
	big := "\x1b]52;c;" + strings.Repeat("QUFB", 1<<16) + "\x07tail"
	if got := filterAll([]byte(big)); string(got) != "tail" {
		t.Fatalf("long payload: got %d bytes %q…", len(got), got[:min(len(got), 20)])
	}
	var f ClipboardFilter
	f.Filter(nil, []byte("\x1b"+strings.Repeat("\x00", 10000)+"]"+strings.Repeat("0", 10000)))
	if len(f.hold) > holdCap+4 {
		t.Fatalf("hold grew to %d bytes", len(f.hold))
	}
	out := f.Filter(nil, []byte("52;c;QUFB\x07ok"))
	if string(out) != "ok" {
		t.Fatalf("got %q", out)
	}
	// A CSI or a hyperlink too long to hold is dropped whole, whatever its end; held bytes stay
	// bounded.
	for _, in := range []string{
		"\x1b[" + strings.Repeat("1;", 1<<12) + "21t", "\x1b[" + strings.Repeat("1;", 1<<12) + "m",
		"\x1b]8;id=" + strings.Repeat("x", 1<<12) + ";https://e.org\x07",
	} {
		var f ClipboardFilter
		f.Filter(nil, []byte(in[:len(in)/2]))
		if len(f.hold) > max(csiCap, linkCap)+4 {
			t.Fatalf("hold grew to %d bytes", len(f.hold))
		}
		if got := filterAll([]byte(in + "ok")); string(got) != "ok" {
			t.Fatalf("long sequence %.20q…: got %.40q", in, got)
		}
	}
}

// checkFilter runs in through the filter in the chunks cuts describes, on one stream and split
// across two streams (stdout and stderr on one terminal), and checks the properties.
func checkFilter(t *testing.T, in, cuts []byte) {
	whole := filterAll(in)
	if !isSubsequence(whole, in) {
		t.Fatalf("output %q is not a subsequence of input %q", whole, in)
	}
	if seen := clipboardSeen(whole); len(seen) > 0 {
		t.Fatalf("terminal would see clipboard OSC %v in output %q of input %q", seen, whole, in)
	}
	if bytes.IndexByte(in, esc) < 0 && bytes.IndexByte(in, c2) < 0 && !bytes.Equal(whole, in) {
		t.Fatalf("input without ESC or C2 changed: %q → %q", in, whole)
	}
	// Chunked: same output.
	var f ClipboardFilter
	var chunked []byte
	// Interleaved: chunks go alternately to two filters whose outputs share a terminal.
	var fa, fb ClipboardFilter
	var mixed []byte
	rest := in
	for i := 0; len(rest) > 0; i++ {
		n := len(rest)
		if i < len(cuts) {
			n = min(int(cuts[i]%32)+1, len(rest))
		}
		chunk := rest[:n]
		rest = rest[n:]
		chunked = f.Filter(chunked, chunk)
		if i < len(cuts) && cuts[i]&0x80 != 0 {
			mixed = fb.Filter(mixed, chunk)
		} else {
			mixed = fa.Filter(mixed, chunk)
		}
	}
	if !bytes.Equal(chunked, whole) {
		t.Fatalf("chunked output %q differs from whole %q (input %q)", chunked, whole, in)
	}
	if seen := clipboardSeen(mixed); len(seen) > 0 {
		t.Fatalf("interleaved streams: terminal would see clipboard OSC %v in %q (input %q)", seen, mixed, in)
	}
}

func FuzzClipboardFilter(f *testing.F) {
	// The seed corpus is in testdata/fuzz/FuzzClipboardFilter; these add the unit cases.
	for _, s := range []string{
		"\x1b]52;c;Zm9v\x07", "\xc2\x9d52;c;Zm9v\xc2\x9c", "\x1b]5\x1b\x1b]52;c;x\x072;c;QUFB\x07",
		"\x1b]0;title\x07", "\x1b[31mred", "ŝ中文",
		"\x1b[21t", "\x1b[22;0t", "\x1b]8;;file:///x\x07t", "\x1b]8;;https://e.org\x1b\\t\x1b]8;;\x1b\\",
	} {
		f.Add([]byte(s), []byte{3, 0x81, 7})
	}
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		checkFilter(t, in, cuts)
	})
}

func TestClipboardFilterFlush(t *testing.T) {
	var f ClipboardFilter
	out := f.Filter(nil, []byte("a\x1b]5"))
	out = f.Flush(out)
	if string(out) != "a\x1b]5" {
		t.Fatalf("Flush: got %q", out)
	}
	// Mid-drop, Flush emits nothing of the dropped sequence but returns to ground.
	out = f.Filter(nil, []byte("\x1b]52;c;QUFB"))
	out = f.Flush(out)
	out = f.Filter(out, []byte("ok"))
	if string(out) != "ok" {
		t.Fatalf("Flush mid-drop: got %q", out)
	}
}
