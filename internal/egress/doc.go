// Package egress decides where exprd may connect on a client's behalf.
//
// Clients hand exprd manuals naming the URLs and gRPC targets of tool
// providers; exprd dials them. Without a check, a client could make exprd
// reach what only exprd can reach: the cloud metadata service
// (169.254.169.254, fd00:ec2::254), the loopback interface, the cluster's
// private network. A [Policy] is the operator's answer to "where may a
// provider be", given with the --egress-allow flag.
//
// # Contract
//
// A connection is allowed when at least one of these holds:
//
//   - the host the URL or target named matches a listed name ("svc.local")
//     or wildcard ("*.svc.cluster.local"); a listed name allows whatever it
//     resolves to, since the operator trusts its own DNS;
//   - the address the connection goes to lies in a listed IP or CIDR
//     ("10.1.2.3", "10.0.0.0/8", or the keyword "loopback");
//   - the address is public: not loopback, private, link-local, multicast,
//     unspecified, reserved, documentation, CGNAT, or an IPv6 prefix that
//     embeds IPv4 (the full table is refusedRanges in check.go).
//
// IPv4-mapped IPv6 addresses (::ffff:10.0.0.1) are judged as the IPv4
// address they carry, everywhere: in the public test and against listed
// IPs and CIDRs. Zones (fe80::1%eth0) are ignored.
//
// The check is made on the resolved address of every connection, in the
// [net.Dialer] Control hook that runs after the socket is made and before
// connect(2) ([Dialer]). A name resolving to a refused address is refused
// however often, and to whatever, it re-resolves: DNS rebinding does not get
// round it, and nothing is sent to a refused address. [Policy.CheckHost] is
// an early check for what can be judged without DNS (IP literals,
// "localhost"), so a manual naming http://169.254.169.254 can be refused when
// it is registered rather than when it is called.
//
// Plaintext (http://, gRPC without TLS) is stricter: only hosts that are
// listed by name, or IP literals inside a listed IP or CIDR, may be reached
// without TLS ([Policy.PlaintextAllowed]). A public host is not allowed
// plaintext unless listed.
//
// # Defaults
//
// With no --egress-allow entries the policy is [Public]: public addresses
// only, over TLS. [Parse](nil) is the same policy. The zero Policy and a nil
// *Policy are not valid: they refuse everything (fail closed) rather than
// allow it, and [Dialer] with no Policy dials nothing.
//
// A [Dialer]'s Resolver defaults to [net.DefaultResolver]; Timeout and
// KeepAlive have [net.Dialer]'s meaning (zero: no timeout beyond the
// context's; keep-alives every 15s).
//
// Refusals are [*Error] values (wrapped in a [*net.OpError] when they come
// from a dial); errors.As finds them.
//
// Policies and Dialers are safe for concurrent use; a Policy does not change
// after Parse.
package egress
