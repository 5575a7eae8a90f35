package egress

import (
	"strings"
	"testing"
)

// FuzzParseEntry checks that every accepted entry is normalized, round-trips through String,
// allows at least one port, and never is a wildcard over a single label.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{"registry.example.org", "*.files.example.net", "modules.example.com:443", "*.com", "[::1]:8080", "10.0.0.1", "a..b", "*.co.uk:80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEntry(s)
		if err != nil {
			return
		}
		if len(e.Ports) == 0 {
			t.Fatalf("%q: no ports", s)
		}
		for _, p := range e.Ports {
			if p == 0 {
				t.Fatalf("%q: port 0", s)
			}
		}
		if e.IsAddr() == (e.Host != "") {
			t.Fatalf("%q: both or neither of host and address: %+v", s, e)
		}
		if e.Wildcard && !strings.Contains(e.Host, ".") {
			t.Fatalf("%q: wildcard over a single label %q", s, e.Host)
		}
		if e.Host != strings.ToLower(e.Host) || strings.HasSuffix(e.Host, ".") {
			t.Fatalf("%q: host not normalized: %q", s, e.Host)
		}
		e2, err := ParseEntry(e.String())
		if err != nil || e2.String() != e.String() {
			t.Fatalf("%q: String %q does not round-trip: %v", s, e.String(), err)
		}
	})
}

// FuzzParseTarget checks that an accepted CONNECT authority has a port, no wildcard, and
// round-trips through String.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"registry.example.org:443", "[::1]:443", "10.0.0.1:80", "*.example.com:443", "example.com", "a:b:c", "[fe80::1%eth0]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		if tg.Port == 0 {
			t.Fatalf("%q: port 0", s)
		}
		if strings.Contains(tg.Name, "*") {
			t.Fatalf("%q: wildcard target", s)
		}
		if tg.Addr.IsValid() == (tg.Name != "") {
			t.Fatalf("%q: both or neither of name and address", s)
		}
		tg2, err := ParseTarget(tg.String())
		if err != nil || tg2 != tg {
			t.Fatalf("%q: %q does not round-trip: %v %v", s, tg.String(), tg2, err)
		}
	})
}
