package egress

import (
	"net/netip"
	"strings"
)

// Error is a connection the policy refused. Dials return it wrapped in a
// [*net.OpError]; errors.As finds it.
type Error struct {
	// Host is the name or IP literal the URL or target named ("" if none).
	Host string
	// Addr is the address the connection would have gone to; it is the zero
	// Addr when the refusal was made without one (plaintext).
	Addr netip.Addr
	// Why completes "ADDR is ...": "private", "loopback", "link-local (cloud
	// metadata lives there)", "not listed for plaintext", ...
	Why string
}

// Error says what was refused, why, and how the operator allows it, e.g.
// "egress refused: 169.254.169.254 is link-local (cloud metadata lives
// there); list it in --egress-allow to allow it".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("egress refused: ")
	host := strings.TrimSuffix(strings.TrimPrefix(e.Host, "["), "]")
	switch {
	case !e.Addr.IsValid():
		if host == "" {
			host = "the connection"
		}
		b.WriteString(host + " is " + e.Why + "; list it in --egress-allow to allow it")
	case host == "" || sameAddr(host, e.Addr):
		b.WriteString(e.Addr.String() + " is " + e.Why + "; list it in --egress-allow to allow it")
	default:
		b.WriteString(e.Host + " resolves to " + e.Addr.String() + ", which is " + e.Why +
			"; list the name or the address in --egress-allow to allow it")
	}
	return b.String()
}

// sameAddr reports whether the literal host names addr.
func sameAddr(host string, addr netip.Addr) bool {
	a, err := netip.ParseAddr(host)
	return err == nil && a == addr
}
