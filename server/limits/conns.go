package limits

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/exprd/exprd/server/ratelimit"
)

// Conns holds at most perPeer connections open at once from one
// peer (an IPv4 address, an IPv6 /64, as the rate limiter keys an
// unauthenticated caller; a trusted proxy has no such bound) and at most
// total in all, over the listeners the server serves. A connection past
// its peer's limit is closed as soon as it is accepted, before anything
// is read from it: it costs no TLS handshake and no HTTP/2 transport. At
// the total, a new connection takes the place of the oldest one that has
// not yet carried a call the tap admitted (with auth on, a call with a
// valid token; health and reflection do not count), which is closed: so
// peers without a token, however many addresses they have, cannot keep a
// caller with one from connecting, as they could when the new connection
// was the one closed. Of those, one that has carried a call the tap
// refused (no valid token: RefusedCall) goes first, the first refused,
// before one that has carried nothing yet: a flood of connections whose
// calls are refused took the place of a caller's new connection before
// its first call was read, over and over, while the server was busy. Only when every
// connection has carried an admitted call is the new one refused.
type Conns struct {
	perPeer, total int
	trusted        func(netip.Addr) bool
	log            *slog.Logger

	mu           sync.Mutex
	peers        map[string]int
	open         int
	byRemote     map[string]*limitedConn // the unproven connections, by remote address
	unproven     list.List               // of *limitedConn that carried nothing yet, oldest first
	refusedCalls list.List               // of *limitedConn that carried only refused calls, oldest first
	refused      atomic.Int64
	evicted      atomic.Int64
	shut         atomic.Int64 // closed for refused calls past their peer's rate
}

// NewConns bounds connections at perPeer from one peer and total in all;
// trusted says which addresses are proxies, with no per-peer bound.
func NewConns(perPeer, total int, trusted func(netip.Addr) bool, log *slog.Logger) *Conns {
	return &Conns{perPeer: perPeer, total: total, trusted: trusted, log: log, peers: map[string]int{}, byRemote: map[string]*limitedConn{}}
}

// Listener accepts l's connections within the limits.
func (l *Conns) Listener(lis net.Listener) net.Listener {
	return &connLimiter{Listener: lis, l: l}
}

type connLimiter struct {
	net.Listener
	l *Conns
}

// Accept returns the next connection within the limits; those past them
// are closed and not returned.
func (cl *connLimiter) Accept() (net.Conn, error) {
	l := cl.l
	for {
		c, err := cl.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := l.peerKey(c.RemoteAddr())
		l.mu.Lock()
		if l.open >= l.total && (key == "" || l.peers[key] < l.perPeer) {
			if victim := l.oldestUnproven(); victim != nil {
				l.mu.Unlock()
				l.evicted.Add(1)
				l.log.Debug("connection closed for a new one", "peer", victim.RemoteAddr().String(), "limit", "max-connections")
				_ = victim.Close()
				l.mu.Lock()
			}
		}
		over := ""
		switch {
		case l.open >= l.total:
			over = "max-connections"
		case key != "" && l.peers[key] >= l.perPeer:
			over = "max-connections-per-peer"
		}
		if over != "" {
			l.mu.Unlock()
			l.refused.Add(1)
			l.log.Debug("connection refused", "peer", c.RemoteAddr().String(), "limit", over)
			_ = c.Close()
			continue
		}
		l.open++
		if key != "" {
			l.peers[key]++
		}
		lc := &limitedConn{Conn: c, l: l, key: key}
		if remote := RemoteKey(c.RemoteAddr()); remote != "" {
			if _, taken := l.byRemote[remote]; !taken {
				lc.remote = remote
				lc.in, lc.elem = &l.unproven, l.unproven.PushBack(lc)
				l.byRemote[remote] = lc
			}
		}
		l.mu.Unlock()
		return lc, nil
	}
}

// oldestUnproven takes the connection a new one takes the place of off
// its list: the oldest that carried only refused calls, else the oldest
// that carried nothing yet; nil when there is none. l.mu is held.
func (l *Conns) oldestUnproven() *limitedConn {
	e := l.refusedCalls.Front()
	if e == nil {
		e = l.unproven.Front()
	}
	if e == nil {
		return nil
	}
	c := e.Value.(*limitedConn)
	l.forget(c)
	return c
}

// forget takes c off its list. l.mu is held.
func (l *Conns) forget(c *limitedConn) {
	if c.elem == nil {
		return
	}
	c.in.Remove(c.elem)
	c.elem, c.in = nil, nil
	if l.byRemote[c.remote] == c {
		delete(l.byRemote, c.remote)
	}
}

// RefusedCall notes that ctx's connection (a tap's) carried a call the tap
// refused: while it carries no admitted call, it is the first a new
// connection takes the place of.
func (l *Conns) RefusedCall(ctx context.Context) {
	key := ConnKey(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.byRemote[key]; c != nil && c.in == &l.unproven {
		c.in.Remove(c.elem)
		c.in, c.elem = &l.refusedCalls, l.refusedCalls.PushBack(c)
	}
}

// Proven notes that ctx's connection (a tap's) carried an admitted call:
// it is no longer the one a new connection takes the place of.
func (l *Conns) Proven(ctx context.Context) {
	key := ConnKey(ctx)
	l.mu.Lock()
	if c := l.byRemote[key]; c != nil {
		l.forget(c)
	}
	l.mu.Unlock()
}

// CloseUnproven closes ctx's connection (a tap's) when it has carried no
// admitted call: a peer whose refused calls are past its rate keeps no
// connection that only refusals use. It says whether it closed one.
func (l *Conns) CloseUnproven(ctx context.Context) bool {
	key := ConnKey(ctx)
	l.mu.Lock()
	c := l.byRemote[key]
	l.mu.Unlock()
	if c == nil {
		return false
	}
	l.shut.Add(1)
	_ = c.Close()
	return true
}

// ConnStats is what Conns closed, by why.
type ConnStats struct {
	Refused int64 // past a limit when accepted, with no place to take
	Evicted int64 // unproven, for a new connection at the total
	Shut    int64 // unproven, for refused calls past their peer's rate
}

// Stats counts what l closed so far.
func (l *Conns) Stats() ConnStats {
	return ConnStats{Refused: l.refused.Load(), Evicted: l.evicted.Load(), Shut: l.shut.Load()}
}

func (l *Conns) peerKey(a net.Addr) string { return PeerKey(a, l.trusted) }

// PeerKey is the peer a connection from a counts against, for the
// connections and the received messages one peer may hold: its address,
// an IPv6 one by its /64; "" for one without a per-peer bound (a trusted
// proxy, which speaks for many clients, or an address that is not IP).
func PeerKey(a net.Addr, trusted func(netip.Addr) bool) string {
	if a == nil {
		return ""
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return ""
	}
	addr := ap.Addr().WithZone("").Unmap()
	if trusted(addr) {
		return ""
	}
	return ratelimit.AddrKey(addr)
}

func (l *Conns) closed(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget(c)
	key := c.key
	l.open--
	if key != "" {
		if l.peers[key]--; l.peers[key] <= 0 {
			delete(l.peers, key)
		}
	}
}

// limitedConn gives its place back when it is closed.
type limitedConn struct {
	net.Conn
	l      *Conns
	key    string
	once   sync.Once
	remote string        // its key in l.byRemote, "" when not there
	in     *list.List    // l.unproven or l.refusedCalls, until it carries an admitted call
	elem   *list.Element // its place in it
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.closed(c) })
	return c.Conn.Close()
}
