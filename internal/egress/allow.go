package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// DefaultPorts are the ports an entry without one allows: HTTPS, then plain HTTP.
var DefaultPorts = []uint16{443, 80}

// Entry is one parsed allowlist entry: a host name, a wildcard over a domain's subdomains, or
// an IP address, with the ports it allows.
type Entry struct {
	// Host is the lower-case host name without a trailing dot ("registry.example.org"), or for
	// a wildcard the domain after "*." ("files.example.net"). Empty for an address entry.
	Host string
	// Wildcard means the entry matches every name strictly under Host, not Host itself.
	Wildcard bool
	// Addr is the address of an address entry (unmapped IPv4 or IPv6, no zone); the zero
	// Addr for a name entry.
	Addr netip.Addr
	// Ports are the allowed ports; an entry written without one has DefaultPorts.
	Ports []uint16
}

// IsAddr reports whether e names an address rather than a host name.
func (e Entry) IsAddr() bool { return e.Addr.IsValid() }

// String returns the entry in the form ParseEntry reads, ports included.
func (e Entry) String() string {
	var h string
	switch {
	case e.IsAddr() && e.Addr.Is6():
		h = "[" + e.Addr.String() + "]"
	case e.IsAddr():
		h = e.Addr.String()
	case e.Wildcard:
		h = "*." + e.Host
	default:
		h = e.Host
	}
	if slices.Equal(e.Ports, DefaultPorts) {
		return h
	}
	return h + ":" + strconv.Itoa(int(e.Ports[0]))
}

// allowsPort reports whether e allows port.
func (e Entry) allowsPort(port uint16) bool { return slices.Contains(e.Ports, port) }

// matchesName reports whether the name entry e covers the normalized host name.
func (e Entry) matchesName(name string) bool {
	if e.IsAddr() {
		return false
	}
	if e.Wildcard {
		return strings.HasSuffix(name, "."+e.Host)
	}
	return name == e.Host
}

// ParseEntry parses one allowlist entry:
//
//	registry.example.org          a host name, ports 443 and 80
//	modules.example.com:443        a host name and one port
//	*.files.example.net          every name under files.example.net (not files.example.net itself)
//	10.1.2.3, [fd00::5]:8443    an address: a target, and a grant for a name resolving to it
//
// A wildcard over a public suffix ("*.com", "*.co.uk", "*.github.io") or over a single label
// ("*.internal") is refused, as are wildcards anywhere but the whole first label, ports
// outside 1–65535, IPv6 zones, non-ASCII names (write them in punycode) and names whose last
// label is numeric (IPv4 in a form other than dotted quad: "127.1", "0x7f.0.0.1").
func ParseEntry(s string) (Entry, error) {
	if s != strings.TrimSpace(s) || s == "" {
		return Entry{}, &EntryError{Entry: s, Reason: "empty or surrounded by spaces"}
	}
	hostPart, port, hasPort, err := splitPort(s)
	if err != nil {
		return Entry{}, &EntryError{Entry: s, Reason: err.Error()}
	}
	e := Entry{Ports: DefaultPorts}
	if hasPort {
		e.Ports = []uint16{port}
	}
	if a, ok, err := parseAddr(hostPart, hasPort || strings.HasPrefix(hostPart, "[")); err != nil {
		return Entry{}, &EntryError{Entry: s, Reason: err.Error()}
	} else if ok {
		e.Addr = a
		return e, nil
	}
	name := hostPart
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		e.Wildcard = true
		name = rest
	}
	if e.Host, err = normalizeName(name); err != nil {
		return Entry{}, &EntryError{Entry: s, Reason: err.Error()}
	}
	if e.Wildcard {
		if ps, _ := publicsuffix.PublicSuffix(e.Host); ps == e.Host {
			return Entry{}, &EntryError{Entry: s, Reason: fmt.Sprintf("a wildcard over %q, a public suffix or a single label, would allow every site under it; name the hosts instead",
				e.Host)}
		}
	}
	return e, nil
}

// splitPort splits "host:port", "[v6]:port", "[v6]", "host" or a bare IPv6 address.
func splitPort(s string) (host string, port uint16, hasPort bool, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, false, fmt.Errorf("missing ]")
		}
		host, rest := s[:end+1], s[end+1:]
		if rest == "" {
			return host, 0, false, nil
		}
		p, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return "", 0, false, fmt.Errorf("unexpected %q after ]", rest)
		}
		port, err := parsePort(p)
		return host, port, true, err
	}
	if strings.Count(s, ":") > 1 {
		return s, 0, false, nil // a bare IPv6 address; parseAddr decides
	}
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return s, 0, false, nil
	}
	port, err = parsePort(p)
	return h, port, true, err
}

// parsePort parses a decimal port 1–65535 (no sign, no leading zeros beyond "0" itself).
func parsePort(p string) (uint16, error) {
	if p == "" || len(p) > 5 || strings.Trim(p, "0123456789") != "" || (len(p) > 1 && p[0] == '0') {
		return 0, fmt.Errorf("invalid port %q", p)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("invalid port %q (1–65535)", p)
	}
	return uint16(n), nil
}

// parseAddr parses an IP literal: dotted-quad IPv4, or IPv6 (bracketed when bracketed is
// true, where a port may follow). It returns ok false for something that is not an address.
func parseAddr(h string, bracketed bool) (netip.Addr, bool, error) {
	if v6, ok := strings.CutPrefix(h, "["); ok {
		v6, ok = strings.CutSuffix(v6, "]")
		if !ok {
			return netip.Addr{}, false, fmt.Errorf("missing ]")
		}
		a, err := netip.ParseAddr(v6)
		if err != nil || !a.Is6() {
			return netip.Addr{}, false, fmt.Errorf("invalid IPv6 address %q", v6)
		}
		if a.Zone() != "" {
			return netip.Addr{}, false, fmt.Errorf("IPv6 zones are not allowed")
		}
		return a.Unmap(), true, nil
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() {
			return netip.Addr{}, false, fmt.Errorf("invalid address %q", h)
		}
		if a.Zone() != "" {
			return netip.Addr{}, false, fmt.Errorf("IPv6 zones are not allowed")
		}
		return a.Unmap(), true, nil
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Is4() {
		return a, true, nil
	}
	return netip.Addr{}, false, nil
}

// normalizeName checks a host name and returns it in lower case without a trailing dot.
// Labels are 1–63 of [a-z0-9-_], the name at most 253 bytes; the last label is not all
// digits (that would be an IPv4 address in a form dotted-quad parsing refuses).
func normalizeName(n string) (string, error) {
	n = strings.TrimSuffix(n, ".")
	if n == "" {
		return "", fmt.Errorf("empty host name")
	}
	if len(n) > 253 {
		return "", fmt.Errorf("host name longer than 253 bytes")
	}
	n = strings.ToLower(n)
	labels := strings.Split(n, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", fmt.Errorf("invalid host name %q (empty or overlong label)", n)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				if c == '*' {
					return "", fmt.Errorf("invalid host name %q (a wildcard is only allowed as the whole first label: *.example.com)", n)
				}
				return "", fmt.Errorf("invalid host name %q (letters, digits, - and _ only; write internationalized names in punycode)", n)
			}
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		return "", fmt.Errorf("invalid host name %q (numeric last label: write an IPv4 address as a dotted quad)", n)
	}
	return n, nil
}

// Allowlist is a parsed list of entries. The zero value (and nil) allows nothing.
type Allowlist struct {
	entries []Entry
}

// ParseAllowlist parses every entry; the error names the first bad one with its index.
func ParseAllowlist(entries []string) (*Allowlist, error) {
	a := &Allowlist{}
	for i, s := range entries {
		e, err := ParseEntry(s)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		a.entries = append(a.entries, e)
	}
	return a, nil
}

// Entries returns a copy of the list's entries.
func (a *Allowlist) Entries() []Entry {
	if a == nil {
		return nil
	}
	return slices.Clone(a.entries)
}

// Empty reports whether a allows nothing.
func (a *Allowlist) Empty() bool { return a == nil || len(a.entries) == 0 }

// Target is a parsed request target: a normalized host name or an address, and a port.
type Target struct {
	// Name is the normalized host name; empty when the target is an address.
	Name string
	// Addr is the target's address when it is an IP literal.
	Addr netip.Addr
	Port uint16
}

// String returns host:port ([v6]:port).
func (t Target) String() string {
	if t.Addr.IsValid() {
		return netip.AddrPortFrom(t.Addr, t.Port).String()
	}
	return t.Name + ":" + strconv.Itoa(int(t.Port))
}

// Host returns the target's host name or address, without port.
func (t Target) Host() string {
	if t.Addr.IsValid() {
		return t.Addr.String()
	}
	return t.Name
}

// ParseTarget parses the authority of a CONNECT request ("host:port", "[v6]:port"). The port
// is required; the host obeys ParseEntry's rules, and no wildcard is allowed.
func ParseTarget(authority string) (Target, error) {
	return parseTarget(authority, 0)
}

// parseTarget parses host[:port]; a missing port is defaultPort, or an error when it is 0.
func parseTarget(authority string, defaultPort uint16) (Target, error) {
	if authority == "" || strings.ContainsAny(authority, " \t\r\n/@?#%\\") {
		return Target{}, fmt.Errorf("%w: %q", ErrBadTarget, authority)
	}
	h, port, hasPort, err := splitPort(authority)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %q: %v", ErrBadTarget, authority, err)
	}
	if !hasPort {
		if defaultPort == 0 {
			return Target{}, fmt.Errorf("%w: %q: a port is required", ErrBadTarget, authority)
		}
		port = defaultPort
	}
	if a, ok, err := parseAddr(h, true); err != nil {
		return Target{}, fmt.Errorf("%w: %q: %v", ErrBadTarget, authority, err)
	} else if ok {
		if !strings.HasPrefix(h, "[") && a.Is6() {
			return Target{}, fmt.Errorf("%w: %q: write an IPv6 address in brackets", ErrBadTarget, authority)
		}
		return Target{Addr: a, Port: port}, nil
	}
	n, err := normalizeName(h)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %q: %v", ErrBadTarget, authority, err)
	}
	return Target{Name: n, Port: port}, nil
}

// allowsTarget checks t against the list: a name needs a name entry that covers it, an
// address an address entry naming it; either with the port. The reason says why not.
func (a *Allowlist) allowsTarget(t Target) (ok bool, reason string) {
	if a == nil {
		return false, ReasonHostNotAllowed
	}
	hostMatch := false
	for _, e := range a.entries {
		var m bool
		if t.Addr.IsValid() {
			m = e.IsAddr() && e.Addr == t.Addr
		} else {
			m = e.matchesName(t.Name)
		}
		if !m {
			continue
		}
		hostMatch = true
		if e.allowsPort(t.Port) {
			return true, ""
		}
	}
	if hostMatch {
		return false, ReasonPortNotAllowed
	}
	return false, ReasonHostNotAllowed
}

// grantsAddr reports whether an address entry names addr with port: the explicit grant a
// non-public address needs.
func (a *Allowlist) grantsAddr(addr netip.Addr, port uint16) bool {
	if a == nil {
		return false
	}
	addr = addr.Unmap()
	for _, e := range a.entries {
		if e.IsAddr() && e.Addr == addr && e.allowsPort(port) {
			return true
		}
	}
	return false
}
