package egress

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
)

func TestParseEntry(t *testing.T) {
	tests := []struct {
		in    string
		want  string // Entry.String(); "" means refused
		ports []uint16
	}{
		{"registry.example.org", "registry.example.org", DefaultPorts},
		{"Registry.EXAMPLE.org.", "registry.example.org", DefaultPorts},
		{"modules.example.com:443", "modules.example.com:443", []uint16{443}},
		{"*.files.example.net", "*.files.example.net", DefaultPorts},
		{"*.files.example.net:8443", "*.files.example.net:8443", []uint16{8443}},
		{"10.1.2.3", "10.1.2.3", DefaultPorts},
		{"127.0.0.1:8080", "127.0.0.1:8080", []uint16{8080}},
		{"[fd00::5]:8443", "[fd00::5]:8443", []uint16{8443}},
		{"[::ffff:10.0.0.1]", "10.0.0.1", DefaultPorts},
		{"fd00::5", "[fd00::5]", DefaultPorts},
		{"my_host.internal.example", "my_host.internal.example", DefaultPorts},
		// Wildcards over public suffixes or single labels.
		{"*.com", "", nil},
		{"*.co.uk", "", nil},
		{"*.github.io", "", nil},
		{"*.internal", "", nil},
		{"*.localhost", "", nil},
		{"*", "", nil},
		{"*.*.example.com", "", nil},
		{"foo*.example.com", "", nil},
		{"a.*.example.com", "", nil},
		// Malformed.
		{"", "", nil},
		{" example.com", "", nil},
		{"example.com:0", "", nil},
		{"example.com:65536", "", nil},
		{"example.com:+443", "", nil},
		{"example.com:0443", "", nil},
		{"example.com:", "", nil},
		{"example..com", "", nil},
		{"ex ample.com", "", nil},
		{"bücher.example", "", nil},
		{"127.1", "", nil},
		{"0x7f.0.0.1", "", nil},
		{"2130706433", "", nil},
		{"[fe80::1%eth0]", "", nil},
		{"fe80::1%eth0", "", nil},
		{"[example.com]:443", "", nil},
		{"https://example.com", "", nil},
		{"user@example.com", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			e, err := ParseEntry(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("ParseEntry(%q) = %v, want an error", tc.in, e)
				}
				if !errors.Is(err, ErrBadEntry) {
					t.Fatalf("error %v is not ErrBadEntry", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseEntry(%q): %v", tc.in, err)
			}
			if got := e.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
			if !slices.Equal(e.Ports, tc.ports) {
				t.Errorf("Ports = %v, want %v", e.Ports, tc.ports)
			}
			// String round-trips.
			e2, err := ParseEntry(e.String())
			if err != nil || e2.String() != e.String() {
				t.Errorf("round trip of %q: %v, %v", e.String(), e2, err)
			}
		})
	}
}

func TestAllowsTarget(t *testing.T) {
	a, err := ParseAllowlist([]string{"registry.example.org", "*.files.example.net", "modules.example.com:443", "10.0.0.7:8080"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		target string
		reason string // "" means allowed
	}{
		{"registry.example.org:443", ""},
		{"REGISTRY.example.org.:80", ""},
		{"registry.example.org:22", ReasonPortNotAllowed},
		{"evil.registry.example.org:443", ReasonHostNotAllowed},
		{"registry.example.org.evil.com:443", ReasonHostNotAllowed},
		{"cdn.files.example.net:443", ""},
		{"a.b.files.example.net:443", ""},
		{"files.example.net:443", ReasonHostNotAllowed},
		{"xfiles.example.net:443", ReasonHostNotAllowed},
		{"modules.example.com:443", ""},
		{"modules.example.com:80", ReasonPortNotAllowed},
		{"10.0.0.7:8080", ""},
		{"10.0.0.7:443", ReasonPortNotAllowed},
		{"[::ffff:10.0.0.7]:8080", ""},
		{"10.0.0.8:8080", ReasonHostNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			tg, err := ParseTarget(tc.target)
			if err != nil {
				t.Fatal(err)
			}
			ok, reason := a.allowsTarget(tg)
			if ok != (tc.reason == "") || reason != tc.reason {
				t.Errorf("allowsTarget(%s) = %v, %q; want reason %q", tc.target, ok, reason, tc.reason)
			}
		})
	}
	var none *Allowlist
	if ok, _ := none.allowsTarget(Target{Name: "example.com", Port: 443}); ok {
		t.Error("a nil allowlist allowed a target")
	}
}

func TestParseTargetRefuses(t *testing.T) {
	for _, s := range []string{"", "example.com", "example.com:", ":443", "example.com:99999", "*.example.com:443",
		"::1:443", "[::1]", "exa mple.com:443", "a/b:443", "user@example.com:443", "[fe80::1%25lo]:443", "127.1:443", "example.com:443:1"} {
		if tg, err := ParseTarget(s); err == nil {
			t.Errorf("ParseTarget(%q) = %v, want an error", s, tg)
		} else if !errors.Is(err, ErrBadTarget) {
			t.Errorf("ParseTarget(%q): %v is not ErrBadTarget", s, err)
		}
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		addr, class string
	}{
		{"8.8.8.8", ""},
		{"203.0.113.5", ""},
		{"2606:4700::1111", ""},
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"0.0.0.0", "unspecified"},
		{"10.201.0.2", "private"},
		{"172.16.3.4", "private"},
		{"192.168.1.1", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"fd00:ec2::254", "unique-local"},
		{"100.100.100.100", "shared"},
		{"224.0.0.1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"64:ff9b::a9fe:a9fe", "link-local (embedded in 64:ff9b::/96)"},
		{"2002:7f00:1::", "loopback (embedded in 2002::/16)"},
		{"2002:808:808::", ""},
	}
	for _, tc := range tests {
		if got := classify(netip.MustParseAddr(tc.addr)); got != tc.class {
			t.Errorf("classify(%s) = %q, want %q", tc.addr, got, tc.class)
		}
	}
}
