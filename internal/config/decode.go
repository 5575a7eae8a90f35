package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// maxFileSize bounds a config file; agentbox's files are a few hundred bytes.
const maxFileSize = 1 << 20

// layer is one decoded file: the values it sets and where.
type layer struct {
	file string
	kind SourceKind
	cfg  Config
	// set maps the path of every key the file sets to the line that sets it.
	set map[string]int
}

// decode parses one file strictly. goccy/go-yaml parses the document and decodes it (with
// DisallowUnknownField); before decoding, check walks the AST against the Config type, because
// the decoder alone is lenient about scalars (it turns `engine: 1` into "1" and `max: 3.5`
// into 3) and reports some errors (bad durations) without a position. Any error is an
// *InvalidError and means nothing of the file applies.
func decode(file string, data []byte) (*layer, error) {
	if len(data) > maxFileSize {
		return nil, &InvalidError{File: file, Msg: fmt.Sprintf("file is larger than %d bytes", maxFileSize)}
	}
	l := &layer{file: file, set: map[string]int{}}
	f, err := parse(data)
	if err != nil {
		return nil, yamlError(file, err)
	}
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || isEmpty(doc.Body) {
			continue
		}
		if body != nil {
			return nil, errorAt(file, doc.Body, "", "more than one YAML document (a config file holds one mapping)")
		}
		body = doc.Body
	}
	if body == nil {
		return l, nil // an empty file means the defaults
	}
	c := checker{file: file, set: l.set}
	if err := c.check(body, reflect.TypeFor[Config](), "", nil, true); err != nil {
		return nil, err
	}
	if err := nodeToValue(body, &l.cfg); err != nil {
		return nil, yamlError(file, err)
	}
	if err := validate(file, body, &l.cfg); err != nil {
		return nil, err
	}
	return l, nil
}

// parse wraps the YAML parser: a panic in it on hostile input becomes an error.
func parse(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed YAML (%v)", r)
		}
	}()
	return parser.ParseBytes(data, 0)
}

func nodeToValue(n ast.Node, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed YAML (%v)", r)
		}
	}()
	return yaml.NodeToValue(n, v, yaml.DisallowUnknownField())
}

func isEmpty(n ast.Node) bool {
	if n == nil {
		return true
	}
	switch n.(type) {
	case *ast.NullNode, *ast.CommentGroupNode, *ast.CommentNode:
		return true
	}
	return false
}

// yamlError turns a goccy/go-yaml error into an *InvalidError with the position it carries.
func yamlError(file string, err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		e := &InvalidError{File: file, Msg: ye.GetMessage()}
		if tk := ye.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Column = tk.Position.Line, tk.Position.Column
		}
		return e
	}
	return &InvalidError{File: file, Msg: err.Error()}
}

// checker walks a YAML AST against a Go type.
type checker struct {
	file string
	set  map[string]int
}

// check verifies that n is a valid value of type t at path; f is the struct field that holds it
// (nil for list and map elements). record says whether a leaf found here is recorded as set by
// the file (not list or map elements, which belong to the leaf that holds them).
func (c *checker) check(n ast.Node, t reflect.Type, path string, f *reflect.StructField, record bool) error {
	switch n.(type) {
	case *ast.AnchorNode, *ast.AliasNode, *ast.TagNode:
		return errorAt(c.file, n, path, "YAML anchors, aliases and tags are not supported in agentbox config")
	}
	if isEmpty(n) {
		return nil // `key:` with no value is the same as an absent key
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isSection(t) {
		return c.section(n, t, path, record)
	}
	if record {
		c.set[path] = line(n)
	}
	if t == reflect.TypeFor[Duration]() {
		s, ok := scalarString(n)
		if !ok {
			return c.wrongType(n, path, "duration (a string such as 5s)")
		}
		v, err := parseDuration(s)
		if err != nil {
			return errorAt(c.file, n, path, err.Error())
		}
		if f != nil {
			if err := checkDurationBounds(*f, v); err != nil {
				return errorAt(c.file, n, path, err.Error())
			}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		s, ok := scalarString(n)
		if !ok {
			return c.wrongType(n, path, "string")
		}
		if f != nil {
			if allowed := enumValues(*f); allowed != nil && !slices.Contains(allowed, s) {
				return errorAt(c.file, n, path, fmt.Sprintf("invalid value %q (allowed: %s)", s, strings.Join(allowed, ", ")))
			}
		}
	case reflect.Bool:
		if _, ok := n.(*ast.BoolNode); !ok {
			return c.wrongType(n, path, "boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		in, ok := n.(*ast.IntegerNode)
		if !ok {
			if s, ok := n.(*ast.StringNode); ok && isPlainDigits(s) {
				return errorAt(c.file, n, path, fmt.Sprintf("integer %s out of range", s.Value))
			}
			return c.wrongType(n, path, "integer")
		}
		var v int64
		switch x := in.Value.(type) {
		case int64:
			v = x
		case uint64:
			v = int64(x)
			ok = x <= math.MaxInt64
		}
		if !ok || reflect.New(t).Elem().OverflowInt(v) {
			return errorAt(c.file, n, path, fmt.Sprintf("integer %s out of range", in.GetToken().Value))
		}
		if f != nil {
			lo, hi := intBounds(*f)
			if (lo != nil && v < *lo) || (hi != nil && v > *hi) {
				return errorAt(c.file, n, path, fmt.Sprintf("invalid value %d (allowed: %s to %s)", v, bound(lo, math.MinInt64), bound(hi, math.MaxInt64)))
			}
		}
	case reflect.Slice:
		sn, ok := n.(*ast.SequenceNode)
		if !ok {
			return c.wrongType(n, path, "list")
		}
		for i, e := range sn.Values {
			if err := c.check(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), nil, false); err != nil {
				return err
			}
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			panic("config: map keys must be strings: " + t.String())
		}
		return c.mapping(n, path, func(k string, _ ast.Node, v ast.Node) error {
			return c.check(v, t.Elem(), joinPath(path, k), nil, false)
		})
	default:
		panic("config: unsupported field type " + t.String())
	}
	return nil
}

// isPlainDigits reports whether s is an unquoted run of digits: an integer too large for the
// YAML parser, which then reads it as a string.
func isPlainDigits(s *ast.StringNode) bool {
	tk := s.GetToken()
	if tk == nil || tk.Type != token.StringType {
		return false
	}
	d := strings.TrimLeft(s.Value, "+-")
	return d != "" && strings.Trim(d, "0123456789") == ""
}

func bound(p *int64, inf int64) string {
	if p == nil {
		if inf < 0 {
			return "-∞"
		}
		return "∞"
	}
	return fmt.Sprint(*p)
}

// section checks a nested mapping whose keys are the fields of struct type t. record says
// whether its leaves are keys of the configuration (not fields of a list or map element).
func (c *checker) section(n ast.Node, t reflect.Type, path string, record bool) error {
	fields := map[string]reflect.StructField{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if name, ok := keyName(f); ok {
			fields[name] = f
			names = append(names, name)
		}
	}
	return c.mapping(n, path, func(k string, kn ast.Node, v ast.Node) error {
		f, ok := fields[k]
		if !ok {
			return errorAt(c.file, kn, joinPath(path, k), fmt.Sprintf("unknown key (known keys%s: %s)", inPath(path), strings.Join(names, ", ")))
		}
		return c.check(v, f.Type, joinPath(path, k), &f, record)
	})
}

func inPath(path string) string {
	if path == "" {
		return ""
	}
	return " of " + path
}

// mapping calls fn for every entry of the mapping n, refusing anything else, duplicate keys and
// keys that are not strings.
func (c *checker) mapping(n ast.Node, path string, fn func(key string, keyNode, value ast.Node) error) error {
	var entries []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		entries = m.Values
	case *ast.MappingValueNode:
		entries = []*ast.MappingValueNode{m}
	default:
		return c.wrongType(n, path, "mapping")
	}
	seen := map[string]bool{}
	for _, e := range entries {
		var kn ast.Node = e.Key
		if mk, ok := kn.(*ast.MappingKeyNode); ok {
			kn = mk.Value
		}
		k, ok := scalarString(kn)
		if !ok || e.Key.IsMergeKey() {
			return errorAt(c.file, kn, path, fmt.Sprintf("key %s is not a plain string", tokenText(kn)))
		}
		if seen[k] {
			return errorAt(c.file, kn, joinPath(path, k), "duplicate key")
		}
		seen[k] = true
		if err := fn(k, kn, e.Value); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) wrongType(n ast.Node, path, want string) error {
	return errorAt(c.file, n, path, fmt.Sprintf("wrong type: got %s, want %s", nodeKind(n), want))
}

// scalarString returns the text of a string scalar (plain, quoted or block).
func scalarString(n ast.Node) (string, bool) {
	switch s := n.(type) {
	case *ast.StringNode:
		return s.Value, true
	case *ast.LiteralNode:
		if s.Value != nil {
			return s.Value.Value, true
		}
	}
	return "", false
}

func nodeKind(n ast.Node) string {
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		return "string"
	case *ast.IntegerNode:
		return "integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "number"
	case *ast.BoolNode:
		return "boolean"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "mapping"
	case *ast.SequenceNode:
		return "list"
	}
	return strings.ToLower(n.Type().String())
}

func tokenText(n ast.Node) string {
	if tk := n.GetToken(); tk != nil {
		return fmt.Sprintf("%q", tk.Value)
	}
	return fmt.Sprintf("%q", n.String())
}

// pos returns the position of n's first token.
func pos(n ast.Node) *token.Position {
	if n == nil {
		return nil
	}
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 && !m.IsFlowStyle {
		n = m.Values[0].Key // a block mapping's own token is its first ':'
	}
	if m, ok := n.(*ast.MappingValueNode); ok {
		n = m.Key
	}
	if tk := n.GetToken(); tk != nil {
		return tk.Position
	}
	return nil
}

func line(n ast.Node) int {
	if p := pos(n); p != nil {
		return p.Line
	}
	return 0
}

// checkDurationBounds checks v against the bounds of f's duration tag (durationBounds).
func checkDurationBounds(f reflect.StructField, v Duration) error {
	lo, hi := durationBounds(f)
	min, _ := time.ParseDuration(lo)
	max, _ := time.ParseDuration(hi)
	if lo != "" && v.Duration() < min || hi != "" && v.Duration() > max {
		allowed := "at least " + lo
		switch {
		case lo != "" && hi != "":
			allowed = lo + " to " + hi
		case lo == "":
			allowed = "at most " + hi
		}
		return fmt.Errorf("invalid value %s (allowed: %s)", v, allowed)
	}
	return nil
}

func errorAt(file string, n ast.Node, path, msg string) error {
	e := &InvalidError{File: file, Field: path, Msg: msg}
	if p := pos(n); p != nil {
		e.Line, e.Column = p.Line, p.Column
	}
	return e
}
