package egress

import (
	"net/netip"
	"testing"
)

// TestRefusedRangesReachable: no range in the table is hidden by one before
// it: its first or its last address (a narrower range inside it, listed
// before it, may hold the other) gets its reason.
func TestRefusedRangesReachable(t *testing.T) {
	t.Parallel()
	for _, r := range refusedRanges {
		t.Run(r.prefix.String(), func(t *testing.T) {
			t.Parallel()
			if r.prefix != r.prefix.Masked() {
				t.Errorf("got prefix %s, want it masked (%s)", r.prefix, r.prefix.Masked())
			}
			if r.prefix.Addr().Is4In6() {
				t.Errorf("got IPv4-mapped prefix %s, want none: addresses are unmapped before the table", r.prefix)
			}
			first, last := r.prefix.Addr(), lastAddr(r.prefix)
			if gotFirst, gotLast := nonPublic(first), nonPublic(last); gotFirst != r.why && gotLast != r.why {
				t.Errorf("nonPublic(%s), nonPublic(%s): got %q, %q, want one of them %q", first, last, gotFirst, gotLast, r.why)
			}
		})
	}
}

// lastAddr is the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
