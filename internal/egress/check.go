package egress

import (
	"net/netip"
	"strings"
)

// refusedRanges are the addresses that are not public: a connection to one
// needs the operator to list it. The first range containing an address gives
// the reason, so a narrower range comes before a wider one holding it.
// Addresses are judged after Unmap: IPv4-mapped IPv6 (::ffff:0:0/96) never
// reaches this table as such.
var refusedRanges = []struct {
	prefix netip.Prefix
	why    string // completes "ADDR is ..."
}{
	// IPv4 (RFC 6890 and the IANA special-purpose registry).
	{pfx("0.0.0.0/32"), "unspecified"},                                                // connecting to it reaches the local host
	{pfx("0.0.0.0/8"), `in 0.0.0.0/8 ("this network"; it reaches the local host)`},    // RFC 791
	{pfx("10.0.0.0/8"), "private"},                                                    // RFC 1918
	{pfx("100.64.0.0/10"), "shared address space (carrier-grade NAT, 100.64.0.0/10)"}, // RFC 6598
	{pfx("127.0.0.0/8"), "loopback"},                                                  // RFC 1122
	{pfx("169.254.0.0/16"), "link-local (cloud metadata lives there)"},                // RFC 3927; 169.254.169.254 is the metadata service
	{pfx("172.16.0.0/12"), "private"},                                                 // RFC 1918
	{pfx("192.0.0.0/24"), "reserved for IETF protocol assignments (192.0.0.0/24)"},    // RFC 6890
	{pfx("192.0.2.0/24"), "documentation (TEST-NET-1)"},                               // RFC 5737
	{pfx("192.168.0.0/16"), "private"},                                                // RFC 1918
	{pfx("198.18.0.0/15"), "reserved for benchmarking (198.18.0.0/15)"},               // RFC 2544
	{pfx("198.51.100.0/24"), "documentation (TEST-NET-2)"},                            // RFC 5737
	{pfx("203.0.113.0/24"), "documentation (TEST-NET-3)"},                             // RFC 5737
	{pfx("224.0.0.0/4"), "multicast"},                                                 // RFC 5771
	{pfx("255.255.255.255/32"), "broadcast"},                                          // RFC 919; inside 240.0.0.0/4
	{pfx("240.0.0.0/4"), "reserved (240.0.0.0/4)"},                                    // RFC 1112
	// IPv6 (RFC 6890, RFC 4291).
	{pfx("::/128"), "unspecified"},                                                       // RFC 4291
	{pfx("::1/128"), "loopback"},                                                         // RFC 4291
	{pfx("::/96"), "IPv4-compatible (deprecated; embeds an IPv4 address)"},               // RFC 4291 §2.5.5.1
	{pfx("64:ff9b::/96"), "NAT64 (embeds an IPv4 address)"},                              // RFC 6052
	{pfx("64:ff9b:1::/48"), "local-use NAT64 (embeds an IPv4 address)"},                  // RFC 8215
	{pfx("100::/64"), "discard-only (100::/64)"},                                         // RFC 6666
	{pfx("2001:db8::/32"), "documentation (2001:db8::/32)"},                              // RFC 3849
	{pfx("2001::/32"), "Teredo (embeds an IPv4 address)"},                                // RFC 4380
	{pfx("2002::/16"), "6to4 (embeds an IPv4 address)"},                                  // RFC 3056
	{pfx("fd00:ec2::254/128"), "private (unique local; AWS cloud metadata lives there)"}, // AWS IMDS over IPv6; inside fc00::/7
	{pfx("fc00::/7"), "private (unique local)"},                                          // RFC 4193
	{pfx("fe80::/10"), "link-local"},                                                     // RFC 4291
	{pfx("fec0::/10"), "site-local (deprecated; private)"},                               // RFC 3879
	{pfx("ff00::/8"), "multicast"},                                                       // RFC 4291
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// Why strings not from refusedRanges.
const (
	whyInvalid   = "not a valid IP address"
	whyNoPolicy  = "not allowed: no egress policy is configured (use egress.Parse or egress.Public)"
	whyNotGlobal = "not a global unicast address"
	whyPlaintext = "not listed for plaintext"
)

// nonPublic returns why a (unmapped, no zone) is not public, or "".
func nonPublic(a netip.Addr) string {
	for _, r := range refusedRanges {
		if r.prefix.Contains(a) {
			return r.why
		}
	}
	// A backstop: the table covers all of these.
	if !a.IsGlobalUnicast() {
		return whyNotGlobal
	}
	return ""
}

// judged is addr as the policy judges it: no zone, IPv4-mapped as IPv4.
func judged(addr netip.Addr) netip.Addr { return addr.WithZone("").Unmap() }

// Check reports whether a connection for host (the name or IP literal the
// URL or target named; may be "") may go to addr (the address it resolved
// to). It returns nil, or an [*Error] saying why not.
//
// It is allowed when host is a listed name or matches a listed wildcard, or
// addr lies in a listed IP or CIDR, or addr is public (see refusedRanges).
// addr is judged without its zone, and an IPv4-mapped IPv6 addr as the IPv4
// address it carries. A nil or zero Policy refuses everything.
func (p *Policy) Check(host string, addr netip.Addr) error {
	if p == nil || !p.ok {
		return &Error{Host: host, Addr: addr, Why: whyNoPolicy}
	}
	if p.matchName(host) {
		return nil
	}
	if !addr.IsValid() {
		return &Error{Host: host, Addr: addr, Why: whyInvalid}
	}
	a := judged(addr)
	if p.listedAddr(a) {
		return nil
	}
	if why := nonPublic(a); why != "" {
		return &Error{Host: host, Addr: addr, Why: why}
	}
	return nil
}

// PlaintextAllowed reports whether a connection without TLS (plain http://,
// plaintext gRPC) may be made to host, the URL's host without its port
// (url.URL.Hostname; brackets around an IPv6 literal are allowed). It may
// only when host is a listed name or matches a listed wildcard, or is an IP
// literal inside a listed IP or CIDR: a public host is not allowed
// plaintext unless listed. A caller refusing plaintext can report it as
// &Error{Host: host, Why: "not listed for plaintext"}.
func (p *Policy) PlaintextAllowed(host string) bool {
	if p == nil || !p.ok {
		return false
	}
	if a, ok := ipLiteral(host); ok {
		return p.listedAddr(judged(a))
	}
	return p.matchName(host)
}

// CheckHost is the early check for a host known before any DNS, such as a
// URL's host when a manual is registered (without its port; brackets
// around an IPv6 literal are allowed):
//
//   - an IP literal is judged as [Policy.Check](host, ip);
//   - "localhost", a name ending in ".localhost", and "" (dialing an empty
//     host reaches the local host) are judged as Check(host, 127.0.0.1);
//   - any other name returns nil: it is checked when it is dialed.
//
// A nil or zero Policy refuses every host.
func (p *Policy) CheckHost(host string) error {
	if p == nil || !p.ok {
		return &Error{Host: host, Why: whyNoPolicy}
	}
	if a, ok := ipLiteral(host); ok {
		return p.Check(host, a)
	}
	if h := normalizeName(host); h == "" || h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return p.Check(host, netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	}
	return nil
}

// ipLiteral parses host as an IP literal, bracketed or not.
func ipLiteral(host string) (netip.Addr, bool) {
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	a, err := netip.ParseAddr(host)
	return a, err == nil
}
