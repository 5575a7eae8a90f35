package console

import "bytes"

// Clipboard modes (console.clipboard in the config, shim.Config.Clipboard).
const (
	// ClipboardDeny drops clipboard escape sequences from the program's output (the default).
	ClipboardDeny = "deny"
	// ClipboardAllow passes the program's output unchanged.
	ClipboardAllow = "allow"
)

// ClipboardFilter passes to the user's terminal only the escape sequences that act on the
// terminal's own screen: it drops every OSC but those of ScreenOSC (the clipboard's OSC 52 and
// 5522, iTerm2's 1337, notifications, …) and every DCS, SOS, PM and APC string, so a program
// in the box cannot set the host clipboard, make the terminal write or read a file, or post
// notifications. A hyperlink (OSC 8) passes only to an http:// or https:// URI (any other is
// dropped whole, its text stays). CSI sequences pass, held to their final byte: they draw the
// screen, and the terminal's answers to the few that ask (cursor position, device attributes)
// hold nothing of the host; but the window operations (CSI … t) are dropped, all but the title
// stack's push and pop (titleStackOp), because their reports type the window title back as
// input and the others act on the host's window. The zero value is ready to use; one filter
// serves one stream and keeps state across calls, so a sequence split over several reads is
// still recognized.
//
// The filter models the terminal's parser (ECMA-48 / the DEC state machine with a strict UTF-8
// decoder) rather than matching literal bytes: ESC and the OSC introducer may be separated by C0
// controls the terminal executes, the numeric parameter may carry leading zeros or C0 controls the
// terminal ignores, and OSC and CSI may be spelled as the C1 controls U+009D and U+009B (bytes
// C2 9D, C2 9B). It holds back the bytes of a sequence until it knows what the terminal would
// make of them, and it never emits bytes that leave the terminal in the middle of an escape, of
// a CSI, of an OSC parameter or of a C2 lead byte; so even if what follows is dropped, or
// interleaved with another stream (stdout and stderr on one terminal), the bytes it does emit can
// never complete a clipboard sequence, a window report or another hyperlink. Output is always a
// subsequence of the input.
//
// Assumptions, stated because the guarantee rests on them: the terminal decodes UTF-8 (raw 8-bit
// C1 bytes such as a lone 0x9D are not controls) and rejects overlong encodings.
type ClipboardFilter struct {
	state clipState
	// hold is the start of a sequence not yet decided; it is emitted or dropped as a whole.
	hold []byte
	// param tracks the OSC numeric parameter being held.
	sig int    // significant digits seen
	val uint64 // their value
	// start is where, in hold, the parameters of a held CSI begin, or the URI of a held OSC 8
	// hyperlink (-1 while its parameters are still being read).
	start int
}

type clipState uint8

const (
	clipGround   clipState = iota
	clipC2                 // held a C2 byte (a possible C1 OSC)
	clipEsc                // held ESC (and C0 controls the terminal executes inside the escape)
	clipParam              // held an OSC introducer and its numeric parameter so far
	clipParamEsc           // held an OSC parameter then ESC: ST (ESC \) or an aborted OSC
	clipParamC2            // held an OSC parameter then C2: C1 ST (C2 9C) or an aborted OSC
	clipDrop               // inside a clipboard OSC: dropping up to its terminator
	clipDropEsc            // dropping, after ESC
	clipDropC2             // dropping, after C2
	clipCSI                // held a CSI introducer and its parameters so far
	clipCSIDrop            // inside a CSI too long to hold: dropping up to its final byte
	clipLink               // held an OSC 8 (hyperlink) up to where its URI's scheme is known
)

const (
	bel = 0x07
	can = 0x18
	sub = 0x1a
	esc = 0x1b
	c2  = 0xc2 // lead byte of U+0080..U+00BF, which include the C1 controls
	osc = 0x9d // second byte of U+009D, OSC
	csi = 0x9b // second byte of U+009B, CSI
	st  = 0x9c // second byte of U+009C, ST
)

// holdCap bounds the held bytes: C0 controls and leading zeros beyond it are dropped instead of
// held (the terminal ignores or merely executes them, so the decision is unaffected).
const holdCap = 64

// csiCap bounds a held CSI (the longest SGR an agent's UI writes, 24-bit foreground and
// background, is under 50 bytes): a longer one is dropped whole, because its final byte, which
// decides whether it may pass, is not known yet and a part of it cannot be emitted.
const csiCap = 256

// linkCap bounds a held OSC 8 up to its URI's scheme (the id= parameter comes before it); a
// longer one is dropped whole.
const linkCap = 256

// maxParamDigits: a parameter with more significant digits than this is treated as a clipboard
// request, so an integer overflow in a terminal's parser cannot turn it into 52.
const maxParamDigits = 9

// executedC0 reports whether b is a C0 control that the terminal executes (or ignores) inside an
// escape or an OSC parameter without leaving it: everything below 0x20 except CAN, SUB and ESC.
func executedC0(b byte) bool {
	return b < 0x20 && b != can && b != sub && b != esc
}

// ScreenOSC are the OSC numbers that pass the filter: those known to act on the terminal's
// own screen only — window and icon titles (0, 1, 2), hyperlinks (8), the colour palette and
// default colours and their resets (4, 10, 11, 12, 104, 110, 111, 112; a query of a colour is
// answered with that colour only, and the agents' UIs ask for the background to pick their
// theme), and shell-integration prompt marks (133). Everything else is dropped: the clipboard
// (52, kitty's 5522), iTerm2's 1337 (Copy=, File=, …), notifications (9, 777, kitty's 99),
// the working folder (7), fonts (50), kitty's file transfer (5113) and whatever is defined
// later.
var ScreenOSC = []uint64{0, 1, 2, 4, 8, 10, 11, 12, 104, 110, 111, 112, 133}

// droppedParam reports whether the OSC number held is not one of ScreenOSC (an OSC without a
// number is OSC 0, as terminals read it).
func (f *ClipboardFilter) droppedParam() bool {
	if f.sig > maxParamDigits {
		return true
	}
	for _, n := range ScreenOSC {
		if f.val == n {
			return false
		}
	}
	return true
}

// stringIntroducer reports whether b, after ESC, opens a control string that ends only at ST:
// DCS (P: sixel images, terminal queries, tmux's passthrough), SOS (X), PM (^) and APC (_:
// kitty's graphics protocol, which can make the terminal read a file). None is needed to
// draw a screen, and they are dropped whole.
func stringIntroducer(b byte) bool { return b == 'P' || b == 'X' || b == '^' || b == '_' }

// c1StringIntroducer is stringIntroducer for the C1 spelling (the byte after C2).
func c1StringIntroducer(b byte) bool { return b == 0x90 || b == 0x98 || b == 0x9e || b == 0x9f }

// Filter appends the filtered form of p to dst and returns the extended slice.
func (f *ClipboardFilter) Filter(dst, p []byte) []byte {
	for i := 0; i < len(p); i++ {
		dst = f.step(dst, p[i])
	}
	return dst
}

// Reset discards an undecided sequence, as at the end of the stream: its bytes are never
// emitted, because a terminal left inside an escape would misparse whatever is written next.
func (f *ClipboardFilter) Reset() {
	*f = ClipboardFilter{hold: f.hold[:0]}
}

// Flush appends the bytes of an undecided sequence to dst and returns to the ground state, for a
// stream that stops being filtered (its reader is no longer a terminal): what the filter held
// back is passed on unchanged, and nothing is lost.
func (f *ClipboardFilter) Flush(dst []byte) []byte {
	if f.state != clipDrop && f.state != clipDropEsc && f.state != clipDropC2 {
		dst = append(dst, f.hold...)
	}
	f.Reset()
	return dst
}

func (f *ClipboardFilter) holdByte(b byte) {
	if len(f.hold) < holdCap {
		f.hold = append(f.hold, b)
	}
}

func (f *ClipboardFilter) emitHold(dst []byte) []byte {
	dst = append(dst, f.hold...)
	f.hold = f.hold[:0]
	return dst
}

func (f *ClipboardFilter) startParam(b byte) {
	f.hold = append(f.hold, b)
	f.state = clipParam
	f.sig, f.val = 0, 0
}

// drop enters the dropping state, discarding what is held.
func (f *ClipboardFilter) drop() {
	f.hold = f.hold[:0]
	f.state = clipDrop
}

// step processes one byte. A byte is re-processed (a loop, never recursion deeper than one
// level) when a held sequence turns out to end before it.
func (f *ClipboardFilter) step(dst []byte, b byte) []byte {
	for {
		switch f.state {
		case clipGround:
			switch b {
			case esc:
				f.hold = append(f.hold[:0], b)
				f.state = clipEsc
			case c2:
				f.hold = append(f.hold[:0], b)
				f.state = clipC2
			default:
				dst = append(dst, b)
			}
			return dst

		case clipC2:
			switch {
			case c1StringIntroducer(b):
				f.drop()
				return dst
			}
			switch b {
			case osc:
				f.startParam(b)
				return dst
			case csi:
				f.hold = append(f.hold, b)
				f.start = len(f.hold)
				f.state = clipCSI
				return dst
			case esc, c2:
				// A C2 not followed by its continuation is invalid UTF-8; emitting it alone would
				// leave the terminal's decoder waiting for a byte that may come after a dropped
				// sequence (C2 … 9D). Drop it.
				f.hold = f.hold[:0]
				f.state = clipGround
				continue
			default:
				dst = f.emitHold(dst)
				dst = append(dst, b)
				f.state = clipGround
				return dst
			}

		case clipEsc:
			switch {
			case b == ']':
				f.startParam(b)
			case stringIntroducer(b):
				// The C0 controls held after the ESC are executed by the terminal; keep them.
				dst = append(dst, f.hold[1:]...)
				f.drop()
			case b == esc:
				// The new ESC supersedes the held one, which does nothing; emitting it alone would
				// leave the terminal in the escape state. Keep the executed C0 controls.
				dst = append(dst, f.hold[1:]...)
				f.hold = append(f.hold[:0], esc)
			case executedC0(b) || b == 0x7f:
				f.holdByte(b)
			case b == '[':
				f.hold = append(f.hold, b)
				f.start = len(f.hold)
				f.state = clipCSI
			case b >= 0x80:
				// Not a valid escape; drop the ESC rather than leave the terminal inside it.
				dst = append(dst, f.hold[1:]...)
				f.hold = f.hold[:0]
				f.state = clipGround
				continue
			default:
				// CAN, SUB or a final/intermediate byte: the terminal leaves the escape state
				// (or enters a sequence that ']' cannot turn into an OSC).
				dst = f.emitHold(dst)
				dst = append(dst, b)
				f.state = clipGround
			}
			return dst

		case clipParam:
			switch {
			case b >= '0' && b <= '9':
				if b == '0' && f.sig == 0 {
					f.holdByte(b) // a leading zero does not change the number
					return dst
				}
				f.sig++
				f.val = f.val*10 + uint64(b-'0')
				if f.sig > maxParamDigits {
					f.drop()
					return dst
				}
				f.hold = append(f.hold, b)
			case executedC0(b) && b != bel:
				f.holdByte(b) // ignored by the terminal inside an OSC
			case b == ';' || b == bel || b == can || b == sub:
				// The parameter is complete (or the OSC ends or is cancelled).
				if f.droppedParam() {
					f.drop()
					if b == ';' {
						return dst
					}
					f.state = clipGround // the terminator or cancel is dropped too
					return dst
				}
				if b == ';' && f.val == 8 {
					// A hyperlink: held until its URI's scheme is known.
					f.hold = append(f.hold, b)
					f.start = -1
					f.state = clipLink
					return dst
				}
				dst = f.emitHold(dst)
				dst = append(dst, b)
				f.state = clipGround
			case b == esc:
				if f.droppedParam() {
					f.drop()
					continue
				}
				f.hold = append(f.hold, b)
				f.state = clipParamEsc
			case b == c2:
				if f.droppedParam() {
					f.drop()
					continue
				}
				f.hold = append(f.hold, b)
				f.state = clipParamC2
			default:
				// Printable non-digit, DEL or non-ASCII inside the number: no legitimate OSC
				// looks like this, and terminals differ on what they make of it. Drop it all.
				f.drop()
				continue
			}
			return dst

		case clipParamEsc:
			switch {
			case b == '\\':
				// ESC \ is ST: a complete, harmless OSC with no payload (e.g. OSC 104).
				dst = f.emitHold(dst)
				dst = append(dst, b)
				f.state = clipGround
			case executedC0(b):
				f.holdByte(b)
			default:
				// The OSC is aborted and the ESC starts a new escape. Drop the aborted OSC: the
				// terminal never sees it, so it cannot be resumed by what follows.
				f.hold = append(f.hold[:0], esc)
				f.state = clipEsc
				continue
			}
			return dst

		case clipParamC2:
			if b == st {
				dst = f.emitHold(dst)
				dst = append(dst, b)
				f.state = clipGround
				return dst
			}
			f.hold = append(f.hold[:0], c2)
			f.state = clipC2
			continue

		case clipDrop:
			switch b {
			case bel, can, sub, st:
				f.state = clipGround
			case esc:
				f.state = clipDropEsc
			case c2:
				f.state = clipDropC2
			}
			return dst

		case clipDropEsc:
			switch {
			case b == '\\':
				f.state = clipGround
			case executedC0(b) || b == esc:
			default:
				// ESC ends the string and starts a new escape sequence, which the terminal
				// parses from its state before the dropped sequence.
				f.hold = append(f.hold[:0], esc)
				f.state = clipEsc
				continue
			}
			return dst

		case clipDropC2:
			if b == st {
				f.state = clipGround
				return dst
			}
			f.state = clipDrop
			continue

		case clipCSI:
			switch {
			case b >= 0x40 && b <= 0x7e:
				// The final byte: the sequence is complete.
				if b == 't' && !titleStackOp(f.hold[f.start:]) {
					f.hold = f.hold[:0]
					f.state = clipGround
					return dst
				}
				dst = f.emitHold(dst)
				dst = append(dst, b)
				f.state = clipGround
			case b >= 0x20 && b <= 0x3f || executedC0(b) || b == 0x7f:
				// A parameter or intermediate byte, or a control the terminal executes or ignores
				// inside the sequence.
				if len(f.hold) >= csiCap {
					f.hold = f.hold[:0]
					f.state = clipCSIDrop
					return dst
				}
				f.hold = append(f.hold, b)
			default:
				// CAN, SUB, ESC or a non-ASCII byte: the terminal abandons the sequence. It never
				// saw it; drop it and read b from the ground state.
				f.hold = f.hold[:0]
				f.state = clipGround
				continue
			}
			return dst

		case clipCSIDrop:
			switch {
			case b >= 0x40 && b <= 0x7e:
				f.state = clipGround
			case b >= 0x20 && b <= 0x3f || executedC0(b) || b == 0x7f:
			default:
				f.state = clipGround
				continue
			}
			return dst

		case clipLink:
			switch {
			case b == ';' && f.start < 0:
				// The end of the parameters (id=…): the URI follows.
				f.hold = append(f.hold, b)
				f.start = len(f.hold)
				return dst
			case f.start == len(f.hold) && (b == bel || b == esc || b == c2):
				// OSC 8 ; params ; ST with no URI ends a link: harmless, it passes.
				switch b {
				case bel:
					dst = f.emitHold(dst)
					dst = append(dst, b)
					f.state = clipGround
				case esc:
					f.hold = append(f.hold, b)
					f.state = clipParamEsc
				case c2:
					f.hold = append(f.hold, b)
					f.state = clipParamC2
				}
				return dst
			case b <= ' ' || b >= 0x7f || len(f.hold) >= linkCap:
				// A terminator or a cancel before the scheme is known, a control or a non-ASCII
				// byte in the parameters or the scheme, or too long: drop the whole sequence
				// (the drop state consumes its terminator).
				f.drop()
				continue
			}
			f.hold = append(f.hold, b)
			if f.start < 0 {
				return dst
			}
			switch linkScheme(f.hold[f.start:]) {
			case schemeWeb:
				// The rest of the URI, the terminator and the link text pass as they come.
				dst = f.emitHold(dst)
				f.state = clipGround
			case schemeOther:
				f.drop()
			}
			return dst
		}
		return dst
	}
}

// titleStackOp reports whether params, the bytes between the introducer and the final byte of a
// CSI … t (XTWINOPS) sequence, ask only to push or pop the title stack (22 and 23, with an
// optional second parameter). Every other window operation is dropped: the reports (11, 13, 14,
// 15, 16, 18, 19, and 20 and 21, which make the terminal type the icon label or the window title
// back as input, a title the program set itself), and the moves, resizes, iconify and raise,
// which act on the host's window rather than on the screen; a resize reaches the program as
// SIGWINCH all the same, so nothing it can ask for is lost to it. Controls the terminal ignores
// inside the sequence are skipped, and a private marker or intermediate byte (CSI > … t,
// CSI SP t) makes it another operation, dropped too.
func titleStackOp(params []byte) bool {
	var p []byte
	for _, b := range params {
		if b >= 0x20 {
			p = append(p, b)
		}
	}
	first, second, two := bytes.Cut(p, []byte{';'})
	first = bytes.TrimLeft(first, "0")
	if string(first) != "22" && string(first) != "23" {
		return false
	}
	if !two {
		return true
	}
	for _, b := range second {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}

type scheme uint8

const (
	schemeUnknown scheme = iota // not yet known: a prefix of an allowed scheme
	schemeWeb                   // http:// or https://
	schemeOther                 // anything else
)

// webSchemes are the URI schemes an OSC 8 hyperlink may use: a link elsewhere (file:, a
// terminal's or a desktop's own handlers) would let a click on text the box wrote act on the
// host.
var webSchemes = []string{"http://", "https://"}

// linkScheme classifies the start of a hyperlink's URI, ASCII case-insensitively.
func linkScheme(uri []byte) scheme {
	prefix := false
	for _, s := range webSchemes {
		n := min(len(uri), len(s))
		if !bytes.EqualFold(uri[:n], []byte(s[:n])) {
			continue
		}
		if len(uri) >= len(s) {
			return schemeWeb
		}
		prefix = true
	}
	if prefix {
		return schemeUnknown
	}
	return schemeOther
}
