package harnessstate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseTOML reads a TOML document (as Codex CLI writes and people edit its config.toml) into
// nested maps: tables and inline tables are map[string]any, arrays []any, strings string,
// booleans bool; numbers, dates and times are kept as their text (tomlRaw), which no carried
// key needs. Arrays of tables ([[x]]) are read and dropped. It is a reader for picking an
// allowlist of keys out of a file, not a validator: it refuses what it cannot read (an error
// means the caller treats the file as empty) and does not check everything TOML forbids
// (a table defined twice merges).
func parseTOML(src []byte) (map[string]any, error) {
	if !utf8.Valid(src) {
		return nil, errors.New("not UTF-8")
	}
	p := &tomlParser{s: string(src)}
	root := map[string]any{}
	cur := root
	for {
		p.skipSpaceComments(true)
		if p.eof() {
			return root, nil
		}
		switch {
		case strings.HasPrefix(p.rest(), "[["):
			p.i += 2
			if _, err := p.key(); err != nil {
				return nil, err
			}
			if !p.consume("]]") {
				return nil, p.errorf("want ]]")
			}
			cur = map[string]any{} // an array of tables: read, not kept
		case p.peek() == '[':
			p.i++
			k, err := p.key()
			if err != nil {
				return nil, err
			}
			if !p.consume("]") {
				return nil, p.errorf("want ]")
			}
			if cur, err = descend(root, k); err != nil {
				return nil, p.errorf("%v", err)
			}
		default:
			if err := p.keyValue(cur, 0); err != nil {
				return nil, err
			}
		}
		p.skipSpace()
		if p.peek() == '#' {
			p.skipComment()
		}
		if !p.eof() && !p.newline() {
			return nil, p.errorf("want a new line")
		}
	}
}

// tomlRaw is a number, date or time, as written.
type tomlRaw string

type tomlParser struct {
	s string
	i int
}

func (p *tomlParser) eof() bool    { return p.i >= len(p.s) }
func (p *tomlParser) rest() string { return p.s[p.i:] }
func (p *tomlParser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.s[p.i]
}

func (p *tomlParser) errorf(format string, a ...any) error {
	line := strings.Count(p.s[:min(p.i, len(p.s))], "\n") + 1
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, a...))
}

func (p *tomlParser) consume(s string) bool {
	if strings.HasPrefix(p.rest(), s) {
		p.i += len(s)
		return true
	}
	return false
}

func (p *tomlParser) skipSpace() {
	for !p.eof() && (p.peek() == ' ' || p.peek() == '\t') {
		p.i++
	}
}

func (p *tomlParser) skipComment() {
	for !p.eof() && p.peek() != '\n' {
		p.i++
	}
}

func (p *tomlParser) newline() bool { return p.consume("\n") || p.consume("\r\n") }

// skipSpaceComments skips blanks and comments, and new lines when lines is set.
func (p *tomlParser) skipSpaceComments(lines bool) {
	for {
		p.skipSpace()
		if p.peek() == '#' {
			p.skipComment()
		}
		if !lines || !p.newline() {
			return
		}
	}
}

// key reads a dotted key: bare or quoted parts joined by dots.
func (p *tomlParser) key() ([]string, error) {
	var parts []string
	for {
		p.skipSpace()
		var part string
		switch c := p.peek(); {
		case c == '"' || c == '\'':
			s, err := p.str()
			if err != nil {
				return nil, err
			}
			part = s
		default:
			j := p.i
			for !p.eof() && isBare(p.peek()) {
				p.i++
			}
			if j == p.i {
				return nil, p.errorf("want a key")
			}
			part = p.s[j:p.i]
		}
		parts = append(parts, part)
		p.skipSpace()
		if !p.consume(".") {
			return parts, nil
		}
	}
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// descend returns the table at path beneath t, creating missing ones.
func descend(t map[string]any, path []string) (map[string]any, error) {
	for _, k := range path {
		switch v := t[k].(type) {
		case nil:
			n := map[string]any{}
			t[k] = n
			t = n
		case map[string]any:
			t = v
		default:
			return nil, fmt.Errorf("%s is not a table", k)
		}
	}
	return t, nil
}

// maxDepth bounds nested arrays and inline tables.
const maxDepth = 32

func (p *tomlParser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.errorf("nested too deep")
	}
	switch c := p.peek(); {
	case c == '"' || c == '\'':
		return p.str()
	case c == '[':
		p.i++
		var out []any
		for {
			p.skipSpaceComments(true)
			if p.consume("]") {
				return out, nil
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			p.skipSpaceComments(true)
			if p.consume(",") {
				continue
			}
			if p.consume("]") {
				return out, nil
			}
			return nil, p.errorf("want , or ]")
		}
	case c == '{':
		p.i++
		out := map[string]any{}
		p.skipSpace()
		if p.consume("}") {
			return out, nil
		}
		for {
			p.skipSpace()
			if err := p.keyValue(out, depth+1); err != nil {
				return nil, err
			}
			p.skipSpace()
			if p.consume(",") {
				continue
			}
			if p.consume("}") {
				return out, nil
			}
			return nil, p.errorf("want , or }")
		}
	case strings.HasPrefix(p.rest(), "true") && !p.bareAfter(4):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.rest(), "false") && !p.bareAfter(5):
		p.i += 5
		return false, nil
	default:
		// A number, date or time: up to the next delimiter (a date-time may hold one space).
		j := p.i
		for !p.eof() && strings.IndexByte(",]}#\r\n", p.peek()) < 0 {
			p.i++
		}
		raw := strings.TrimRight(p.s[j:p.i], " \t")
		p.i = j + len(raw)
		if raw == "" || strings.ContainsAny(raw, "\"'=[{") {
			return nil, p.errorf("want a value")
		}
		return tomlRaw(raw), nil
	}
}

// keyValue reads key = value into t, the value at nesting depth.
func (p *tomlParser) keyValue(t map[string]any, depth int) error {
	k, err := p.key()
	if err != nil {
		return err
	}
	if !p.consume("=") {
		return p.errorf("want =")
	}
	p.skipSpace()
	v, err := p.value(depth)
	if err != nil {
		return err
	}
	dst, err := descend(t, k[:len(k)-1])
	if err != nil {
		return p.errorf("%v", err)
	}
	dst[k[len(k)-1]] = v
	return nil
}

func (p *tomlParser) bareAfter(n int) bool { return p.i+n < len(p.s) && isBare(p.s[p.i+n]) }

// str reads one of TOML's four kinds of string.
func (p *tomlParser) str() (string, error) {
	switch {
	case p.consume(`"""`):
		p.newline() // a new line right after the opening quotes is not part of the string
		return p.basic(`"""`, true)
	case p.consume(`'''`):
		p.newline()
		end := strings.Index(p.rest(), `'''`)
		if end < 0 {
			return "", p.errorf("unterminated string")
		}
		// Up to two quotes may end the content right before the closing ones.
		for k := 0; k < 2 && end+3 < len(p.rest()) && p.rest()[end+3] == '\''; k++ {
			end++
		}
		s := p.rest()[:end]
		p.i += end + 3
		return s, nil
	case p.consume(`"`):
		return p.basic(`"`, false)
	case p.consume(`'`):
		end := strings.IndexAny(p.rest(), "'\n")
		if end < 0 || p.rest()[end] != '\'' {
			return "", p.errorf("unterminated string")
		}
		s := p.rest()[:end]
		p.i += end + 1
		return s, nil
	}
	return "", p.errorf("want a string")
}

// basic reads a basic string's content up to the closing quote(s), with its escapes.
func (p *tomlParser) basic(closing string, multi bool) (string, error) {
	var b strings.Builder
	for {
		if p.eof() {
			return "", p.errorf("unterminated string")
		}
		if strings.HasPrefix(p.rest(), closing) {
			p.i += len(closing)
			if multi {
				// Up to two quotes may end the content right before the closing ones.
				for k := 0; k < 2 && p.peek() == '"'; k++ {
					b.WriteByte('"')
					p.i++
				}
			}
			return b.String(), nil
		}
		c := p.peek()
		switch {
		case c == '\\':
			p.i++
			e := p.peek()
			p.i++
			switch e {
			case 'b':
				b.WriteByte('\b')
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'f':
				b.WriteByte('\f')
			case 'r':
				b.WriteByte('\r')
			case 'e':
				b.WriteByte(0x1b)
			case '"':
				b.WriteByte('"')
			case '\\':
				b.WriteByte('\\')
			case 'u', 'U', 'x':
				n := map[byte]int{'u': 4, 'U': 8, 'x': 2}[e]
				if p.i+n > len(p.s) {
					return "", p.errorf("bad escape")
				}
				r, err := strconv.ParseUint(p.s[p.i:p.i+n], 16, 32)
				if err != nil || !utf8.ValidRune(rune(r)) {
					return "", p.errorf("bad escape")
				}
				b.WriteRune(rune(r))
				p.i += n
			case ' ', '\t', '\r', '\n':
				if !multi {
					return "", p.errorf("bad escape")
				}
				// A line-ending backslash trims the white space up to the next text.
				p.i--
				for !p.eof() && strings.IndexByte(" \t\r\n", p.peek()) >= 0 {
					p.i++
				}
			default:
				return "", p.errorf("bad escape")
			}
		case c == '\n' && !multi:
			return "", p.errorf("unterminated string")
		default:
			b.WriteByte(c)
			p.i++
		}
	}
}

// tomlString quotes s as a TOML basic string: quote, backslash and control characters are
// escaped, so that no value can end its string, its line or its table.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
