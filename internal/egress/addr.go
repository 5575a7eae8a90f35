package egress

import "net/netip"

// nonPublic are the ranges a name may not resolve into without an address entry: the host
// itself, its LAN, cloud metadata and everything that is not a public unicast destination.
var nonPublic = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"}, // connect(0.0.0.0) reaches the host
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared"}, // carrier-grade NAT, tailnets
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"}, // 169.254.169.254: cloud metadata
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // and 255.255.255.255
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "reserved"}, // IPv4-compatible
	{netip.MustParsePrefix("100::/64"), "reserved"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// embeddedV4 are IPv6 ranges that carry an IPv4 address a gateway may deliver to (NAT64,
// 6to4): their embedded address is classified too.
var embeddedV4 = []struct {
	prefix netip.Prefix
	offset int // byte offset of the IPv4 address
}{
	{netip.MustParsePrefix("64:ff9b::/96"), 12},
	{netip.MustParsePrefix("64:ff9b:1::/48"), 12},
	{netip.MustParsePrefix("2002::/16"), 2},
}

// classify returns "" for a public unicast address, or the class of range it belongs to
// ("loopback", "private", "link-local", "unique-local", …).
func classify(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	for _, r := range nonPublic {
		if r.prefix.Contains(a) {
			return r.class
		}
	}
	if a.Is6() {
		b := a.As16()
		for _, e := range embeddedV4 {
			if e.prefix.Contains(a) {
				if c := classify(netip.AddrFrom4([4]byte(b[e.offset : e.offset+4]))); c != "" {
					return c + " (embedded in " + e.prefix.String() + ")"
				}
			}
		}
	}
	return ""
}
