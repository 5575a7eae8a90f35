package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/goccy/go-yaml"
)

// FuzzDecode feeds arbitrary bytes to the strict decoder. It must never panic; it either
// refuses the input with an *InvalidError or returns values that satisfy every rule, and
// writing those values out and decoding them again gives the same values.
func FuzzDecode(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := decode("fuzz.yaml", data)
		if err != nil {
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("error %T is not an *InvalidError: %v", err, err)
			}
			return
		}
		checkValid(t, l.cfg)
		for k := range l.set {
			if !slices.Contains(Keys(), k) {
				t.Fatalf("set records %q, which is not a key", k)
			}
		}
		out, err := yaml.Marshal(l.cfg)
		if err != nil {
			t.Fatalf("marshal %+v: %v", l.cfg, err)
		}
		l2, err := decode("roundtrip.yaml", out)
		if err != nil {
			t.Fatalf("re-decoding %q: %v", out, err)
		}
		if !reflect.DeepEqual(l2.cfg, l.cfg) {
			t.Fatalf("round trip changed %+v into %+v", l.cfg, l2.cfg)
		}
	})
}

// checkValid fails unless every set string and integer of c is one its tags allow.
func checkValid(t *testing.T, c Config) {
	t.Helper()
	for _, l := range leaves() {
		v := c.fieldByIndex(l.index)
		switch v.Kind() {
		case reflect.String:
			if e := enumValues(l.field); v.String() != "" && e != nil && !slices.Contains(e, v.String()) {
				t.Fatalf("%s: %q accepted", l.path, v.String())
			}
		case reflect.Int:
			lo, hi := intBounds(l.field)
			if n := v.Int(); n != 0 && ((lo != nil && n < *lo) || (hi != nil && n > *hi)) {
				t.Fatalf("%s: %d accepted", l.path, n)
			}
		}
	}
	if c.StopGrace < 0 {
		t.Fatalf("stopGrace %v accepted", c.StopGrace)
	}
}
