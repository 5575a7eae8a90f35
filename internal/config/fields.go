package config

import (
	"encoding"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// leaf is one key of the configuration that a layer sets as a whole: a field whose type is not a
// nested struct. Its path is the dotted yaml path ("console.clipboard").
type leaf struct {
	path  string
	index []int
	field reflect.StructField
}

var (
	leavesOnce sync.Once
	leafList   []leaf
)

// leaves lists the keys of Config in declaration order.
func leaves() []leaf {
	leavesOnce.Do(func() { leafList = collectLeaves(reflect.TypeFor[Config](), "", nil) })
	return leafList
}

func collectLeaves(t reflect.Type, prefix string, index []int) []leaf {
	var out []leaf
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := keyName(f)
		if !ok {
			continue
		}
		path := joinPath(prefix, name)
		idx := append(append([]int(nil), index...), i)
		if isSection(f.Type) {
			out = append(out, collectLeaves(f.Type, path, idx)...)
			continue
		}
		out = append(out, leaf{path: path, index: idx, field: f})
	}
	return out
}

// isSection reports whether t is a nested mapping whose keys merge one by one.
func isSection(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(textUnmarshalerType)
}

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

// keyName returns the yaml key of a struct field (its json name) and whether it is a key at all.
func keyName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, true
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func (c *Config) fieldByIndex(index []int) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(index)
}

// enumValues returns the values a jsonschema tag allows for a string field; nil means any.
func enumValues(f reflect.StructField) []string {
	var out []string
	for _, kv := range strings.Split(f.Tag.Get("jsonschema"), ",") {
		if k, v, _ := strings.Cut(kv, "="); k == "enum" {
			out = append(out, v)
		}
	}
	return out
}

// durationBounds returns the least and the greatest value a `duration:"min=…,max=…"` tag
// sets on a Duration field, as written there ("" for no bound).
func durationBounds(f reflect.StructField) (lo, hi string) {
	for _, kv := range strings.Split(f.Tag.Get("duration"), ",") {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "min":
			lo = v
		case "max":
			hi = v
		}
	}
	return lo, hi
}

// intBounds returns the minimum and maximum a jsonschema tag sets on an integer field.
func intBounds(f reflect.StructField) (lo, hi *int64) {
	for _, kv := range strings.Split(f.Tag.Get("jsonschema"), ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "minimum":
			lo = &n
		case "maximum":
			hi = &n
		}
	}
	return lo, hi
}
