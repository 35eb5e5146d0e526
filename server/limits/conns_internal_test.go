package limits

import (
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"google.golang.org/grpc/peer"
)

// fakeListener accepts connections from the addresses it is given, in
// turn.
type fakeListener struct {
	net.Listener
	from chan net.Addr
}

func (l *fakeListener) Accept() (net.Conn, error) {
	a, ok := <-l.from
	if !ok {
		return nil, net.ErrClosed
	}
	return &fakeConn{remote: a}, nil
}

type fakeConn struct {
	net.Conn
	remote net.Addr
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.remote }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

func tcpAddr(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }

// An IPv6 peer is its /64, as the rate limiter keys it: two addresses of
// one /64 share its connections, one of another /64 does not; an
// IPv4-mapped address is its IPv4 one; a trusted proxy has no bound.
func TestConnectionsPerPeerIPv6(t *testing.T) {
	trusted := func(a netip.Addr) bool { return a == netip.MustParseAddr("2001:db8:0:9::1") }
	for _, tt := range []struct {
		name    string
		from    []string // the connections at the limit (2), then the one past it
		refused bool
	}{
		{"one /64", []string{"[2001:db8::1]:1", "[2001:db8::2]:1", "[2001:db8::ffff:1]:1"}, true},
		{"another /64", []string{"[2001:db8::1]:1", "[2001:db8::2]:1", "[2001:db8:0:1::1]:1"}, false},
		{"IPv4 and IPv4-mapped", []string{"192.0.2.1:1", "[::ffff:192.0.2.1]:2", "192.0.2.1:3"}, true},
		{"a trusted proxy", []string{"[2001:db8:0:9::1]:1", "[2001:db8:0:9::1]:2", "[2001:db8:0:9::1]:3"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			from := make(chan net.Addr, len(tt.from)+1)
			lis := NewConns(2, 100, trusted, slog.New(slog.DiscardHandler)).Listener(&fakeListener{from: from})
			for _, a := range tt.from[:2] {
				from <- tcpAddr(a)
				if _, err := lis.Accept(); err != nil {
					t.Fatalf("%s at the limit: %v", a, err)
				}
			}
			past := tcpAddr(tt.from[2])
			from <- past
			close(from) // a refused connection makes Accept go on to the next: none
			c, err := lis.Accept()
			if refused := err != nil; refused != tt.refused {
				t.Fatalf("%s one past the limit: accepted %v (%v), want refused %v", past, c, err, tt.refused)
			}
		})
	}
}

// A connection gives its place back when it is closed, once however often
// it is closed.
func TestConnectionPlaceGivenBack(t *testing.T) {
	from := make(chan net.Addr, 4)
	l := NewConns(1, 100, func(netip.Addr) bool { return false }, slog.New(slog.DiscardHandler))
	lis := l.Listener(&fakeListener{from: from})
	from <- tcpAddr("192.0.2.1:1")
	c, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	_ = c.Close()
	from <- tcpAddr("192.0.2.1:2")
	if _, err := lis.Accept(); err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	if l.open != 1 || l.peers["192.0.2.1"] != 1 {
		t.Fatalf("open %d, the peer's %d; want 1 and 1", l.open, l.peers["192.0.2.1"])
	}
}

// At the total, a new connection takes the place of the oldest that has
// carried no admitted call, which is closed; when every one has, the new
// one is refused. A peer at its own limit takes no one's place.
func TestConnectionTakesAnUnprovenPlace(t *testing.T) {
	for _, tt := range []struct {
		name    string
		proven  []int  // which of the three open connections carried an admitted call
		refused []int  // which carried a refused call (after proven: a proven one stays proven)
		from    string // the fourth
		evicted int    // the index of the connection closed for it; -1: it is refused
	}{
		{"none proven: the oldest goes", nil, nil, "192.0.2.9:1", 0},
		{"the oldest proven: the next goes", []int{0}, nil, "192.0.2.9:1", 1},
		{"all proven: refused", []int{0, 1, 2}, nil, "192.0.2.9:1", -1},
		{"its peer at its limit: refused", nil, nil, "192.0.2.1:9", -1},
		{"one carried a refused call: it goes before the oldest", nil, []int{2}, "192.0.2.9:1", 2},
		{"two did: the first refused", nil, []int{2, 1}, "192.0.2.9:1", 2},
		{"a proven one that carried a refused call stays", []int{2}, []int{2}, "192.0.2.9:1", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			from := make(chan net.Addr, 4)
			l := NewConns(1, 3, func(netip.Addr) bool { return false }, slog.New(slog.DiscardHandler))
			lis := l.Listener(&fakeListener{from: from})
			var open []*fakeConn
			for _, a := range []string{"192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1"} {
				from <- tcpAddr(a)
				c, err := lis.Accept()
				if err != nil {
					t.Fatalf("%s at the limit: %v", a, err)
				}
				open = append(open, c.(*limitedConn).Conn.(*fakeConn))
			}
			for _, i := range tt.proven {
				l.Proven(peer.NewContext(t.Context(), &peer.Peer{Addr: open[i].remote}))
			}
			for _, i := range tt.refused {
				l.RefusedCall(peer.NewContext(t.Context(), &peer.Peer{Addr: open[i].remote}))
			}
			from <- tcpAddr(tt.from)
			close(from)
			_, err := lis.Accept()
			if refused := err != nil; refused != (tt.evicted < 0) {
				t.Fatalf("the fourth: refused %v (%v), want %v", refused, err, tt.evicted < 0)
			}
			for i, c := range open {
				if c.closed != (i == tt.evicted) {
					t.Errorf("connection %d closed %v, want %v", i, c.closed, i == tt.evicted)
				}
			}
			if l.open != 3 {
				t.Errorf("%d open, want 3", l.open)
			}
		})
	}
}
