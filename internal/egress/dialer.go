package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Dialer dials through a [Policy]: every connection's resolved address is
// checked in a [net.Dialer] Control hook, after the socket is made and
// before connect(2), so nothing is sent to a refused address. A name that
// resolves to several addresses is tried at each in turn (as [net.Dialer]
// does); refused ones fail with an [*Error] without being connected to, and
// when every one is refused the dial's error wraps an [*Error].
//
// A Dialer is safe for concurrent use. Its fields must not change while it
// is in use.
type Dialer struct {
	// Policy judges every connection. Nil refuses every dial.
	Policy *Policy
	// Resolver resolves host names; nil is net.DefaultResolver.
	Resolver *net.Resolver
	// Timeout bounds each dial, as net.Dialer.Timeout (zero: none beyond the
	// context's).
	Timeout time.Duration
	// KeepAlive is net.Dialer.KeepAlive (zero: 15s; negative: off).
	KeepAlive time.Duration
}

// DialContext connects to address on the named network ("tcp", "tcp4",
// "tcp6", "udp", "udp4" or "udp6") if the policy allows it. It has the
// signature of http.Transport.DialContext. The host of address (a name or IP
// literal) is what listed names and wildcards are matched against; each
// address it resolves to is judged by [Policy.Check] before connecting.
//
// A refusal is returned as a [*net.OpError] wrapping an [*Error].
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("egress: network %q is not supported", network)}
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var policy *Policy
	if d != nil {
		policy = d.Policy
	}
	if policy == nil || !policy.ok {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &Error{Host: host, Why: whyNoPolicy}}
	}
	nd := net.Dialer{
		Timeout:   d.Timeout,
		KeepAlive: d.KeepAlive,
		Resolver:  d.Resolver,
		Control: func(_, resolved string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(resolved)
			if err != nil {
				return &Error{Host: host, Why: whyInvalid + " (" + resolved + ")"}
			}
			return policy.Check(host, ap.Addr())
		},
	}
	return nd.DialContext(ctx, network, address)
}

// GRPCDialer returns d.DialContext on "tcp", with the signature
// grpc.WithContextDialer takes. gRPC passes the dialer the target's address
// as its resolver produced it: use a "passthrough:///host:port" target so
// the dialer sees (and resolves, and matches listed names against) the host
// name rather than addresses gRPC's own DNS resolver found.
func (d *Dialer) GRPCDialer() func(context.Context, string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}
}
