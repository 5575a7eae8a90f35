package integrity

import (
	"bytes"
	"strings"
)

// ignoresItself reports whether the .gitignore holding patterns b ignores the file .gitignore
// beside it, by git's own rules (dir.c, add_patterns_from_buffer and last_matching_pattern;
// wildmatch.c), not an approximation of them (review 13, F5: path.Match took "[!x]gitignore"
// and a leading byte order mark for patterns that do not match): a UTF-8 byte order mark at
// the start is skipped; lines end at "\n" (one "\r" before it dropped); a line starting with
// "#" is a comment; trailing spaces go unless escaped with "\"; a leading "!" negates; a
// trailing "/" names folders only (never the file .gitignore); a pattern without another "/"
// is matched against the name, one with a "/" against the path from the .gitignore's folder
// (a leading "/" dropped), "*" and "?" not matching a "/" there and "**/" any number of
// folders; "[…]" is a class ("[!…]" and "[^…]" negated, ranges, "[:alpha:]"-style classes), and
// "\" quotes the next character. The last pattern that matches decides: "tmp/.gitignore"
// holding "*" and "!.gitignore", the usual way to keep an empty folder, does not ignore
// itself. Case matters (core.ignoreCase is false on Linux).
func ignoresItself(b []byte) bool {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	ignored := false
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		pat := trimTrailingSpaces(cString(string(line)))
		neg := strings.HasPrefix(pat, "!")
		if neg {
			pat = pat[1:]
		}
		if pat == "" || strings.HasSuffix(pat, "/") {
			continue
		}
		var match bool
		if !strings.Contains(pat, "/") {
			match = wildmatch(pat, ".gitignore", false)
		} else {
			match = wildmatch(strings.TrimPrefix(pat, "/"), ".gitignore", true)
		}
		if match {
			ignored = !neg
		}
	}
	return ignored
}

// trimTrailingSpaces drops the spaces at the end of a pattern, but not one escaped with "\"
// (dir.c, trim_trailing_spaces; a tab stays).
func trimTrailingSpaces(s string) string {
	last := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			if last < 0 {
				last = i
			}
		case '\\':
			i++
			if i == len(s) {
				return s
			}
			fallthrough
		default:
			last = -1
		}
	}
	if last >= 0 {
		return s[:last]
	}
	return s
}

// wildmatch reports whether text matches the glob pattern as git's wildmatch does (without
// WM_CASEFOLD); pathname is WM_PATHNAME: "*", "?" and classes then never match a "/", and
// "**" between slashes matches any number of folders.
func wildmatch(pattern, text string, pathname bool) bool {
	return doWild(pattern, text, pathname) == wmMatch
}

const (
	wmMatch = iota
	wmNoMatch
	wmAbortAll
	wmAbortToStarStar
)

// doWild is wildmatch.c's dowild over Go strings: a position at or past the end reads as NUL.
func doWild(p, text string, pathname bool) int {
	at := func(s string, i int) byte {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	pi, ti := 0, 0
	for ; pi < len(p); pi, ti = pi+1, ti+1 {
		pch := p[pi]
		tch := at(text, ti)
		if tch == 0 && pch != '*' {
			return wmAbortAll
		}
		switch pch {
		case '\\':
			// A literal match with the next character (none: no match).
			pi++
			pch = at(p, pi)
			if tch != pch {
				return wmNoMatch
			}
			continue
		default:
			if tch != pch {
				return wmNoMatch
			}
			continue
		case '?':
			if pathname && tch == '/' {
				return wmNoMatch
			}
			continue
		case '*':
			matchSlash := !pathname
			pi++
			if at(p, pi) == '*' {
				prev := pi - 2
				for pi++; at(p, pi) == '*'; pi++ {
				}
				switch {
				case !pathname:
					// Without WM_PATHNAME "*" is "**".
				case (prev < 0 || p[prev] == '/') &&
					(at(p, pi) == 0 || at(p, pi) == '/' || at(p, pi) == '\\' && at(p, pi+1) == '/'):
					if at(p, pi) == '/' && doWild(p[pi+1:], text[ti:], pathname) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				default:
					matchSlash = false
				}
			}
			if pi >= len(p) {
				// A trailing "**" matches everything, a trailing "*" what has no more "/".
				if !matchSlash && strings.IndexByte(text[ti:], '/') >= 0 {
					return wmNoMatch
				}
				return wmMatch
			}
			if !matchSlash && p[pi] == '/' {
				// One "*" followed by a "/" matches the next folder's name.
				j := strings.IndexByte(text[ti:], '/')
				if j < 0 {
					return wmNoMatch
				}
				ti += j // the loop's increments consume the "/" in both
				continue
			}
			for {
				if tch == 0 {
					break
				}
				// A literal after the "*": skip to where it occurs (not past a "/" the
				// "*" cannot match).
				if !isGlobSpecial(p[pi]) {
					for tch = at(text, ti); tch != 0 && (matchSlash || tch != '/'); tch = at(text, ti) {
						if tch == p[pi] {
							break
						}
						ti++
					}
					if tch != p[pi] {
						return wmNoMatch
					}
				}
				if m := doWild(p[pi:], text[ti:], pathname); m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && tch == '/' {
					return wmAbortToStarStar
				}
				ti++
				tch = at(text, ti)
			}
			return wmAbortAll
		case '[':
			pi++
			pch = at(p, pi)
			if pch == '^' {
				pch = '!'
			}
			negated := pch == '!'
			if negated {
				pi++
				pch = at(p, pi)
			}
			var prev byte
			matched := false
			for {
				if pch == 0 {
					return wmAbortAll
				}
				switch {
				case pch == '\\':
					pi++
					pch = at(p, pi)
					if pch == 0 {
						return wmAbortAll
					}
					if tch == pch {
						matched = true
					}
				case pch == '-' && prev != 0 && at(p, pi+1) != 0 && at(p, pi+1) != ']':
					pi++
					pch = at(p, pi)
					if pch == '\\' {
						pi++
						pch = at(p, pi)
						if pch == 0 {
							return wmAbortAll
						}
					}
					if tch <= pch && tch >= prev {
						matched = true
					}
					pch = 0 // prev becomes 0
				case pch == '[' && at(p, pi+1) == ':':
					s := pi + 2
					for pi = s; at(p, pi) != 0 && p[pi] != ']'; pi++ {
					}
					if at(p, pi) == 0 {
						return wmAbortAll
					}
					if pi-s-1 < 0 || p[pi-1] != ':' {
						// No ":]": a plain "[" in the set.
						pi = s - 2
						pch = '['
						if tch == pch {
							matched = true
						}
						break
					}
					in, ok := inCharClass(p[s:pi-1], tch)
					if !ok {
						return wmAbortAll
					}
					if in {
						matched = true
					}
					pch = 0
				default:
					if tch == pch {
						matched = true
					}
				}
				prev = pch
				pi++
				if pch = at(p, pi); pch == ']' {
					break
				}
			}
			if matched == negated || pathname && tch == '/' {
				return wmNoMatch
			}
		}
	}
	if ti < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

func isGlobSpecial(c byte) bool { return c == '*' || c == '?' || c == '[' || c == '\\' }

// inCharClass reports whether c is in the named POSIX class (ASCII, as git's sane ctype), and
// whether the name is one.
func inCharClass(name string, c byte) (in, ok bool) {
	alpha := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	digit := '0' <= c && c <= '9'
	punct := c > ' ' && c < 0x7f && !alpha && !digit
	switch name {
	case "alnum":
		return alpha || digit, true
	case "alpha":
		return alpha, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < ' ' || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return c > ' ' && c < 0x7f, true
	case "lower":
		return 'a' <= c && c <= 'z', true
	case "print":
		return c >= ' ' && c < 0x7f, true
	case "punct":
		return punct, true
	case "space":
		return c == ' ' || c == '\t' || c == '\n' || c == '\r', true
	case "upper":
		return 'A' <= c && c <= 'Z', true
	case "xdigit":
		return digit || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F', true
	}
	return false, false
}
