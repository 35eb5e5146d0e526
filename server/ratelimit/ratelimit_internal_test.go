package ratelimit

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

func peerCtx(addr string, xff ...string) context.Context {
	ap := netip.MustParseAddrPort(addr)
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: net.TCPAddrFromAddrPort(ap)})
	if len(xff) > 0 {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(append([]string{}, "x-forwarded-for", xff[0])...))
	}
	return ctx
}

func TestClientKey(t *testing.T) {
	t.Parallel()
	lb := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name    string
		proxies []netip.Prefix
		ctx     context.Context
		want    string
	}{
		{"an IPv4 peer", nil, peerCtx("203.0.113.7:5000"), "203.0.113.7"},
		{"an IPv6 peer by its /64", nil, peerCtx("[2001:db8:1:2:3:4:5:6]:5000"), "2001:db8:1:2::/64"},
		{"another address of the same /64", nil, peerCtx("[2001:db8:1:2:ffff::1]:5000"), "2001:db8:1:2::/64"},
		{"an IPv4-mapped peer as IPv4", nil, peerCtx("[::ffff:203.0.113.7]:5000"), "203.0.113.7"},
		{"x-forwarded-for from an untrusted peer is ignored", nil, peerCtx("203.0.113.7:5000", "198.51.100.1"), "203.0.113.7"},
		{"x-forwarded-for from a trusted proxy names the client", lb, peerCtx("10.1.1.1:5000", "198.51.100.1"), "198.51.100.1"},
		{"the last untrusted hop is the client", lb, peerCtx("10.1.1.1:5000", "192.0.2.9, 198.51.100.1, 10.2.2.2"), "198.51.100.1"},
		{"a spoofed first hop does not help", lb, peerCtx("10.1.1.1:5000", "1.2.3.4, 198.51.100.1"), "198.51.100.1"},
		{"an unreadable hop stops the walk", lb, peerCtx("10.1.1.1:5000", "198.51.100.1, junk"), "10.1.1.1"},
		{"an IPv6 client behind a proxy by its /64", lb, peerCtx("10.1.1.1:5000", "2001:db8:9::1"), "2001:db8:9::/64"},
		{"no header from a trusted proxy", lb, peerCtx("10.1.1.1:5000"), "10.1.1.1"},
	} {
		l := New(1, 1, 10, tc.proxies)
		if got := l.ClientKey(tc.ctx); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The buckets are bounded however many callers come: 100,000 distinct
// callers leave at most the bound, and the latest ones.
func TestRateBucketsBounded(t *testing.T) {
	t.Parallel()
	const bound = 1000
	l := New(1, 1, bound, nil)
	for i := range 100_000 {
		ctx := peerCtx(fmt.Sprintf("[2001:db8:%x:%x::1]:5000", i>>16, i&0xffff))
		if err := l.Limit(ctx); err != nil {
			t.Fatalf("caller %d's first RPC: %v", i, err)
		}
	}
	if got := l.buckets.Len(); got != bound {
		t.Errorf("buckets: got %d, want the bound %d", got, bound)
	}
	// The most recent caller is remembered: its second RPC is over its burst.
	if err := l.Limit(peerCtx("[2001:db8:1:869f::1]:5000")); err == nil {
		t.Errorf("the latest caller's second RPC: got admitted, want over its burst of 1")
	}
}
