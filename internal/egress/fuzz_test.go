package egress_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/exprd/exprd/internal/egress"
)

// FuzzParseCheck: Parse, Check, CheckHost and PlaintextAllowed never panic;
// Public never allows a non-public address; and a policy listing no IP,
// CIDR or loopback keyword never allows one for a connection with no host
// name.
func FuzzParseCheck(f *testing.F) {
	f.Add("10.0.0.0/8,svc.local", "svc.local", []byte{10, 0, 0, 1})
	f.Add("*.svc.cluster.local", "a.svc.cluster.local", []byte{169, 254, 169, 254})
	f.Add("loopback", "localhost", []byte{127, 0, 0, 1})
	f.Add("example.com", "", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1})
	f.Add("fd00::/8,::1", "[::1]", []byte{0xfd, 0, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54})
	f.Add("a..b,*", "x", []byte{8, 8, 8, 8})
	f.Add("::ffff:10.0.0.0/104", "", []byte{10, 1, 2, 3})
	f.Fuzz(func(t *testing.T, entries, host string, raw []byte) {
		addr, ok := netip.AddrFromSlice(raw)
		if !ok {
			addr = netip.Addr{}
		}
		list := strings.Split(entries, ",")
		p, err := egress.Parse(list)
		if err == nil {
			_ = p.Check(host, addr)
			_ = p.CheckHost(host)
			_ = p.PlaintextAllowed(host)
			if got := len(p.Entries()); got != len(list) {
				t.Errorf("Entries: got %d, want %d", got, len(list))
			}
		} else if p != nil {
			t.Errorf("Parse(%q): got a policy and error %v, want nil policy", list, err)
		}

		if !addr.IsValid() || !nonPublic(addr) {
			return
		}
		if err := egress.Public().Check(host, addr); err == nil {
			t.Errorf("Public().Check(%q, %s): got allowed, want refused", host, addr)
		}
		if err == nil && !listsAddresses(list) {
			if err := p.Check("", addr); err == nil {
				t.Errorf("Parse(%q).Check(\"\", %s): got allowed, want refused (no IP listed)", list, addr)
			}
		}
	})
}

// nonPublic is, independently of the package's table, a subset of what
// must be refused unless listed.
func nonPublic(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsPrivate() || a.IsUnspecified() ||
		a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast()
}

// listsAddresses reports whether any entry may list addresses: anything
// that is not plainly a name.
func listsAddresses(entries []string) bool {
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if strings.EqualFold(e, "loopback") || strings.ContainsAny(e, ":/") {
			return true
		}
		if _, err := netip.ParseAddr(e); err == nil {
			return true
		}
	}
	return false
}
