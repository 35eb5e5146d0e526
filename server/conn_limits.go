package server

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exprd/exprd/internal/recvgate"
)

// connLimits holds at most perPeer connections open at once from one
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
// was the one closed. Only when every connection has carried such a call
// is the new one refused.
type connLimits struct {
	perPeer, total int
	trusted        func(netip.Addr) bool
	log            *slog.Logger

	mu       sync.Mutex
	peers    map[string]int
	open     int
	byRemote map[string]*limitedConn // the unproven connections, by remote address
	unproven list.List               // of *limitedConn, oldest first
	refused  atomic.Int64
	evicted  atomic.Int64
	shut     atomic.Int64 // closed for refused calls past their peer's rate
}

func newConnLimits(perPeer, total int, trusted func(netip.Addr) bool, log *slog.Logger) *connLimits {
	return &connLimits{perPeer: perPeer, total: total, trusted: trusted, log: log, peers: map[string]int{}, byRemote: map[string]*limitedConn{}}
}

// listener accepts l's connections within the limits.
func (l *connLimits) listener(lis net.Listener) net.Listener {
	return &connLimiter{Listener: lis, l: l}
}

type connLimiter struct {
	net.Listener
	l *connLimits
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
		if remote := remoteKey(c.RemoteAddr()); remote != "" {
			if _, taken := l.byRemote[remote]; !taken {
				lc.remote = remote
				lc.elem = l.unproven.PushBack(lc)
				l.byRemote[remote] = lc
			}
		}
		l.mu.Unlock()
		return lc, nil
	}
}

// oldestUnproven takes the oldest connection that has carried no admitted
// call off the list; nil when there is none. l.mu is held.
func (l *connLimits) oldestUnproven() *limitedConn {
	e := l.unproven.Front()
	if e == nil {
		return nil
	}
	c := e.Value.(*limitedConn)
	l.forget(c)
	return c
}

// forget takes c off the unproven list. l.mu is held.
func (l *connLimits) forget(c *limitedConn) {
	if c.elem == nil {
		return
	}
	l.unproven.Remove(c.elem)
	c.elem = nil
	if l.byRemote[c.remote] == c {
		delete(l.byRemote, c.remote)
	}
}

// proven notes that ctx's connection (a tap's) carried an admitted call:
// it is no longer the one a new connection takes the place of.
func (l *connLimits) proven(ctx context.Context) {
	key := connKey(ctx)
	l.mu.Lock()
	if c := l.byRemote[key]; c != nil {
		l.forget(c)
	}
	l.mu.Unlock()
}

// closeUnproven closes ctx's connection (a tap's) when it has carried no
// admitted call: a peer whose refused calls are past its rate keeps no
// connection that only refusals use. It says whether it closed one.
func (l *connLimits) closeUnproven(ctx context.Context) bool {
	key := connKey(ctx)
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

func (l *connLimits) peerKey(a net.Addr) string { return peerKey(a, l.trusted) }

// peerKey is the peer a connection from a counts against, for the
// connections and the received messages one peer may hold: its address,
// an IPv6 one by its /64; "" for one without a per-peer bound (a trusted
// proxy, which speaks for many clients, or an address that is not IP).
func peerKey(a net.Addr, trusted func(netip.Addr) bool) string {
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
	return addrKey(addr)
}

func (l *connLimits) closed(c *limitedConn) {
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
	l      *connLimits
	key    string
	once   sync.Once
	remote string        // its key in l.byRemote, "" when not there
	elem   *list.Element // in l.unproven, until it carries an admitted call
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.closed(c) })
	return c.Conn.Close()
}

// connOptions are the limits of a connection before any token is checked.
type connOptions struct {
	maxHeaderListSize   uint32
	unaryStreamsPerConn int
	connectionTimeout   time.Duration
	maxConnsPerPeer     int
	maxConns            int
	recvMsgTimeout      time.Duration
	recvPeerShare       float64
	compressed          bool // grpc-go may decompress messages
}

func defaultConnOptions() connOptions {
	return connOptions{
		maxHeaderListSize:   DefaultMaxHeaderListSize,
		unaryStreamsPerConn: DefaultUnaryStreamsPerConn,
		connectionTimeout:   DefaultConnectionTimeout,
		maxConnsPerPeer:     DefaultMaxConnsPerPeer,
		maxConns:            DefaultMaxConns,
		recvMsgTimeout:      DefaultRecvMsgTimeout,
		recvPeerShare:       DefaultRecvPeerShare,
	}
}

// WithMaxHeaderListSize bounds the headers of one request, in bytes as
// HTTP/2 counts them (default DefaultMaxHeaderListSize); at least 1 KiB.
func WithMaxHeaderListSize(n int) Option {
	return func(o *options) error {
		if n < 1<<10 || n > math.MaxUint32 {
			return fmt.Errorf("max header list size %d: want at least 1024", n)
		}
		o.conn.maxHeaderListSize = uint32(n)
		return nil
	}
}

// WithUnaryStreamsPerConn sets the HTTP/2 streams a connection has for
// unary RPCs beyond its streaming ones (default DefaultUnaryStreamsPerConn).
func WithUnaryStreamsPerConn(n int) Option {
	return func(o *options) error {
		return positive("unary streams per connection", n, func() { o.conn.unaryStreamsPerConn = n })
	}
}

// WithConnectionTimeout bounds a new connection's handshake (default
// DefaultConnectionTimeout).
func WithConnectionTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("connection timeout %v: want a positive duration", d)
		}
		o.conn.connectionTimeout = d
		return nil
	}
}

// WithMaxConns bounds the connections open at once from one peer and in
// all (defaults DefaultMaxConnsPerPeer, DefaultMaxConns).
func WithMaxConns(perPeer, total int) Option {
	return func(o *options) error {
		if perPeer < 1 || total < 1 {
			return fmt.Errorf("max connections %d per peer, %d in all: want both positive", perPeer, total)
		}
		o.conn.maxConnsPerPeer, o.conn.maxConns = perPeer, total
		return nil
	}
}

// WithRecvMsgTimeout bounds how long a message longer than a stream's
// window may take to arrive once the memory budget has room for it
// (default DefaultRecvMsgTimeout).
func WithRecvMsgTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("received message timeout %v: want a positive duration", d)
		}
		o.conn.recvMsgTimeout = d
		return nil
	}
}

// WithRecvPeerShare sets the part of the memory budget the messages one
// peer is sending may hold at once (default DefaultRecvPeerShare); 1 is
// no bound but the budget's.
func WithRecvPeerShare(share float64) Option {
	return func(o *options) error {
		if !(share > 0 && share <= 1) {
			return fmt.Errorf("received messages' share per peer %v: want more than 0 and at most 1", share)
		}
		o.conn.recvPeerShare = share
		return nil
	}
}

// WithCompressedMessages lets clients send compressed messages (a
// grpc-encoding grpc-go knows, such as gzip); each is then reserved for
// at the most it may inflate to, --max-recv-msg-size, before it is
// decompressed. Default: a call with a grpc-encoding other than identity
// is refused UNIMPLEMENTED before any of its messages is read.
func WithCompressedMessages() Option {
	return func(o *options) error { o.conn.compressed = true; return nil }
}

// gateOptions are the receive gate's: only streams the tap admitted,
// each message in its time, each peer within its share, compressed
// messages at their inflated bound.
func (s *Server) gateOptions() []recvgate.Option {
	o := &s.opts.conn
	opts := []recvgate.Option{recvgate.WithAdmission(), recvgate.WithArrivalTimeout(o.recvMsgTimeout)}
	if o.recvPeerShare < 1 {
		limit := int64(o.recvPeerShare * float64(s.opts.memory.Limit()))
		opts = append(opts, recvgate.WithPeerLimit(limit, func(a net.Addr) string { return peerKey(a, s.rate.trusted) }))
	}
	if o.compressed {
		opts = append(opts, recvgate.WithCompressed(s.opts.maxRecvMsgSize))
	}
	return opts
}
