package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Policy says where exprd may dial on a client's behalf: the hosts and
// addresses the operator listed, and public addresses. The zero value and
// nil are not valid (they refuse everything); use [Parse] or [Public].
type Policy struct {
	ok       bool
	entries  []string
	prefixes []netip.Prefix      // listed IPs (as /32 or /128) and CIDRs; IPv4 unmapped
	names    map[string]struct{} // listed names, lower case, no trailing dot
	suffixes []string            // wildcards, as ".svc.cluster.local"
}

// loopbackKeyword is the entry that lists the loopback interface.
const loopbackKeyword = "loopback"

// Parse builds a policy from the operator's --egress-allow list. Each entry
// is one of:
//
//   - an IP: "10.1.2.3", "::1";
//   - a CIDR: "10.0.0.0/8", "fd00::/8" (host bits are ignored);
//   - a host name: "svc.ns.svc.cluster.local", "localhost";
//   - a wildcard of host names: "*.svc.cluster.local" matches any name
//     ending in ".svc.cluster.local", not the bare "svc.cluster.local";
//   - the keyword "loopback": 127.0.0.0/8, ::1/128 and the name "localhost".
//
// Names are case-insensitive and a trailing dot is ignored; spaces around an
// entry are ignored. An IPv4-mapped IP or CIDR ("::ffff:10.0.0.0/104") is
// taken as the IPv4 one it carries. An empty entry, a bad IP or CIDR, a
// name with characters other than [A-Za-z0-9.-] (after an optional leading
// "*."), a "*" anywhere but a leading "*.", a URL, a port, an empty label
// ("a..b", ".a"), or a name whose last label is a number (a mistyped IP such
// as "10.0.0.256") is an error naming the entry.
//
// Parse(nil), and Parse of an empty list, is [Public]().
func Parse(entries []string) (*Policy, error) {
	p := &Policy{ok: true, names: map[string]struct{}{}}
	if len(entries) == 0 {
		return p, nil
	}
	p.entries = append([]string(nil), entries...)
	for _, raw := range entries {
		if err := p.add(strings.TrimSpace(raw)); err != nil {
			return nil, fmt.Errorf("egress: bad --egress-allow entry %q: %s", raw, err)
		}
	}
	return p, nil
}

// Public is the default policy: public addresses only, nothing listed.
func Public() *Policy {
	return &Policy{ok: true, names: map[string]struct{}{}}
}

// Entries returns the listed entries as they were given to [Parse], for logs
// and docs. It is empty for [Public].
func (p *Policy) Entries() []string {
	if p == nil {
		return nil
	}
	return append([]string(nil), p.entries...)
}

// add adds one trimmed entry.
func (p *Policy) add(e string) error {
	switch {
	case e == "":
		return fmt.Errorf("empty entry")
	case strings.Contains(e, "://"):
		return fmt.Errorf("a URL: list its host name or IP")
	case strings.EqualFold(e, loopbackKeyword):
		p.prefixes = append(p.prefixes, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
		p.names["localhost"] = struct{}{}
		return nil
	case strings.Contains(e, "/"):
		pfx, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("bad CIDR: %v", err)
		}
		p.prefixes = append(p.prefixes, unmapPrefix(pfx.Masked()))
		return nil
	}
	if a, err := netip.ParseAddr(e); err == nil {
		if a.Zone() != "" {
			return fmt.Errorf("an IP with a zone is not supported")
		}
		a = a.Unmap()
		p.prefixes = append(p.prefixes, netip.PrefixFrom(a, a.BitLen()))
		return nil
	} else if strings.Contains(e, ":") {
		if _, port, perr := net.SplitHostPort(e); perr == nil && port != "" {
			return fmt.Errorf("has a port: list the host or IP without it")
		}
		return fmt.Errorf("bad IP: %v", err)
	}
	name := normalizeName(e)
	wildcard := false
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		name, wildcard = rest, true
	}
	if strings.Contains(name, "*") {
		return fmt.Errorf(`a wildcard is only allowed as a leading "*."`)
	}
	if err := validName(name); err != nil {
		return err
	}
	if wildcard {
		p.suffixes = append(p.suffixes, "."+name)
	} else {
		p.names[name] = struct{}{}
	}
	return nil
}

// unmapPrefix turns an IPv4-mapped IPv6 prefix of at least /96 into the
// IPv4 prefix it covers.
func unmapPrefix(pfx netip.Prefix) netip.Prefix {
	if a := pfx.Addr(); a.Is4In6() && pfx.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), pfx.Bits()-96)
	}
	return pfx
}

// normalizeName lower-cases a host name and drops one trailing dot.
func normalizeName(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// validName reports why a normalized name (no "*." prefix) is not one Parse
// accepts, or nil.
func validName(name string) error {
	if name == "" {
		return fmt.Errorf("empty host name")
	}
	if len(name) > 253 {
		return fmt.Errorf("host name longer than 253 characters")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("not an IP, CIDR or host name: %q is not allowed in a host name (only [A-Za-z0-9.-])", c)
		}
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return fmt.Errorf(`empty label in host name (for every name under a domain, write "*.domain")`)
		}
		if len(l) > 63 {
			return fmt.Errorf("host name label longer than 63 characters")
		}
	}
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("looks like an IP address but is not one")
	}
	return nil
}

// matchName reports whether host is a listed name or matches a wildcard.
func (p *Policy) matchName(host string) bool {
	if host == "" {
		return false
	}
	h := normalizeName(host)
	if _, ok := p.names[h]; ok {
		return true
	}
	for _, s := range p.suffixes {
		if len(h) > len(s) && strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// listedAddr reports whether a (unmapped, no zone) lies in a listed IP or
// CIDR.
func (p *Policy) listedAddr(a netip.Addr) bool {
	for _, pfx := range p.prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}
