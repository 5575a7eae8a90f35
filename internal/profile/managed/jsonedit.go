package managed

import (
	"encoding/json"
	"errors"
	"fmt"
)

// member is one key of a JSON object, by byte offsets into the document.
type member struct {
	key      string
	keyStart int // the key's opening quote
	valStart int
	valEnd   int
}

// object is a JSON object's members and the offsets of its braces.
type object struct {
	open, close int // offsets of '{' and '}'
	members     []member
}

var errNotObject = errors.New("not a JSON object")

// parseObject scans the object whose '{' is at or after start (after whitespace) in b, which
// must be valid JSON. Offsets let the caller splice values without touching other bytes.
func parseObject(b []byte, start int) (*object, error) {
	i := skipWS(b, start)
	if i >= len(b) || b[i] != '{' {
		return nil, errNotObject
	}
	o := &object{open: i}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return nil, errors.New("unterminated object")
		}
		if b[i] == '}' {
			o.close = i
			return o, nil
		}
		if b[i] == ',' {
			i++
			continue
		}
		ks := i
		ke, err := skipString(b, i)
		if err != nil {
			return nil, err
		}
		var key string
		if err := json.Unmarshal(b[ks:ke], &key); err != nil {
			return nil, err
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return nil, errors.New("missing ':'")
		}
		vs := skipWS(b, i+1)
		ve, err := skipValue(b, vs)
		if err != nil {
			return nil, err
		}
		o.members = append(o.members, member{key: key, keyStart: ks, valStart: vs, valEnd: ve})
		i = ve
	}
}

func (o *object) find(key string) (int, bool) {
	// JSON allows duplicate keys; Claude Code (JSON.parse) takes the last one.
	for i := len(o.members) - 1; i >= 0; i-- {
		if o.members[i].key == key {
			return i, true
		}
	}
	return -1, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func skipString(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, fmt.Errorf("expected a string at offset %d", i)
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errors.New("unterminated string")
}

func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("missing value")
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				e, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errors.New("unterminated value")
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i, nil
		}
	}
	return i, nil
}

func splice(b []byte, from, to int, with []byte) []byte {
	out := make([]byte, 0, len(b)-(to-from)+len(with))
	out = append(out, b[:from]...)
	out = append(out, with...)
	return append(out, b[to:]...)
}

// lookup returns the raw value at path (object keys) in doc, and whether it exists.
func lookup(doc []byte, path []string) ([]byte, bool, error) {
	start := 0
	for i, k := range path {
		o, err := parseObject(doc, start)
		if err != nil {
			return nil, false, err
		}
		j, ok := o.find(k)
		if !ok {
			return nil, false, nil
		}
		m := o.members[j]
		if i == len(path)-1 {
			return doc[m.valStart:m.valEnd], true, nil
		}
		start = m.valStart
	}
	return nil, false, nil
}

// set returns doc with the value at path replaced by (or, when absent, a new key holding)
// val; every other byte of doc is kept. A missing parent object is created.
func set(doc []byte, path []string, val []byte) ([]byte, error) {
	start := 0
	for i, k := range path {
		o, err := parseObject(doc, start)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", path[:i], err)
		}
		j, ok := o.find(k)
		if ok && i == len(path)-1 {
			m := o.members[j]
			return splice(doc, m.valStart, m.valEnd, val), nil
		}
		if ok {
			start = o.members[j].valStart
			continue
		}
		// Insert path[i:] as a new member of o.
		nv := val
		for p := len(path) - 1; p > i; p-- {
			kb, _ := json.Marshal(path[p])
			nv = append(append(append([]byte("{"), kb...), ':'), append(nv, '}')...)
		}
		kb, _ := json.Marshal(k)
		entry := append(append(kb, ": "...), nv...)
		indent := "  "
		if len(o.members) == 0 {
			return splice(doc, o.open+1, o.close, append(append([]byte("\n"+indent), entry...), '\n')), nil
		}
		last := o.members[len(o.members)-1]
		return splice(doc, last.valEnd, last.valEnd, append([]byte(",\n"+indent), entry...)), nil
	}
	return doc, nil
}

// del returns doc without the key at path (a no-op when absent); every other byte is kept.
func del(doc []byte, path []string) ([]byte, error) {
	start := 0
	for i, k := range path {
		o, err := parseObject(doc, start)
		if err != nil {
			return nil, err
		}
		j, ok := o.find(k)
		if !ok {
			return doc, nil
		}
		if i < len(path)-1 {
			start = o.members[j].valStart
			continue
		}
		ms := o.members
		switch {
		case len(ms) == 1:
			return splice(doc, o.open+1, o.close, nil), nil
		case j > 0:
			return splice(doc, ms[j-1].valEnd, ms[j].valEnd, nil), nil
		default:
			return splice(doc, ms[0].keyStart, ms[1].keyStart, nil), nil
		}
	}
	return doc, nil
}
