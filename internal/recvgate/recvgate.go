// Package recvgate admits large received gRPC messages into the server's
// memory budget before their bytes arrive.
//
// grpc-go assembles a whole message before a handler sees it, and it lets
// a stream's sender send the whole message as soon as the handler asks for
// it (it raises the stream's flow-control window to the message's length).
// So 128 streams each sending a 15 MB message hold 1.9 GB of frames, and
// their decoded copies as much again, however fast each one is refused
// after. grpc-go has no hook between a message's 5-byte length prefix and
// its body; HTTP/2 flow control is the only brake it leaves, and it is
// per stream.
//
// The gate sits between grpc-go and the connection and reads the HTTP/2
// frames going both ways (it never changes what a client sent). When a
// stream's next message is longer than the stream's flow-control window,
// it reserves twice the message's length in the memory budget (the frames
// and the decoded copy) and, until the reservation is made, holds back
// the WINDOW_UPDATE frames grpc-go sends for that stream: the client can
// send no more of it than the window it already had. Other streams, and
// the connection, go on. A reservation the budget cannot make in its wait
// is taken from an overdraft instead (a part of the budget kept for it),
// waiting as long as it takes:
// the message then arrives, and the handler's own reservation of its
// decoded state refuses it with RESOURCE_EXHAUSTED, as before. Messages
// wait for the overdraft first come, first served, so that none waits
// behind later ones for ever while the budget is spent. The
// reservation ends when the handler asks for the next message
// (StreamInterceptor) or the RPC ends (the handler works on a message
// after grpc-go has decoded it: a state is copied and decoded again), or
// when the connection closes.
//
// A decoded message releases its own stream's reservation and no
// other's: the server's tap (Admit, or Tap for a server without a tap of
// its own) tags the RPC's context with its HTTP/2 stream, which the
// StatsHandler reads. The gate gives grpc-go a connection's bytes up to
// the end of each header block and no further, and grpc-go runs the tap
// for that block before it reads again, so the stream is the one whose
// header block the gate read last. The RPC of a server whose tap does
// not tag it releases its messages' room only when its stream ends. The
// StatsHandler finds the gate's connection by the local address value
// the connection hands grpc-go, its own whatever its text: connections
// with the same addresses (behind a proxy or a NAT) are kept apart.
//
// So the memory of messages being received is bounded by the budget, the
// overdraft, and one flow-control window per open stream, instead of one
// largest message per open stream.
//
// With WithAdmission, the gate reserves only for the streams a
// grpc.InTapHandle admitted (Admit): a stream grpc-go refuses, for want
// of a token or anything else, never holds a byte of the budget, however
// long its messages claim to be. The gate learns which stream the tap
// decides on by giving grpc-go the bytes of a connection up to the end of
// each header block and no further: grpc-go decides on a stream (the tap
// runs in its reading goroutine) before it reads again. An admitted
// stream may also be given a limit of its own, smaller than the largest
// message: a longer message resets it before grpc-go is given the frame
// after the one that carries its length.
//
// With WithPeerLimit, what one peer's messages hold at once is bounded,
// so that one client cannot take the whole budget and overdraft from the
// others; its further messages wait for its own to be released. A peer
// is the caller Admit names (a token), else the connection's address:
// a caller's streams from many addresses share one limit. With
// WithArrivalTimeout, a message whose room was reserved must arrive
// within the timeout, else its stream is reset (a RST_STREAM to the
// client, and one given to grpc-go as if the client had sent it) and its
// room released: a client that claims a length and stops sending holds
// the room for that long at most. With WithCompressed, a compressed
// message reserves its inflated bound instead of its length, and grpc-go
// is not given its last byte before the room is reserved.
package recvgate

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/tap"

	"github.com/exprd/exprd/membudget"
)

// What a reservation is for, as the budget names it.
const what = "a received message"

// Gate admits the large messages of the connections it wraps.
type Gate struct {
	budget         *membudget.Budget
	overdraft      *semaphore.Weighted // first come, first served
	overdraftLimit int64
	window         uint32   // messages longer than this are admitted
	conns          sync.Map // the open connections, each its own key

	admission bool          // only streams Admit admitted are reserved for
	arrival   time.Duration // a reserved message must arrive within this; 0: no bound
	inflated  int64         // a compressed message's bound once inflated; 0: its length counts
	peerLimit int64         // bytes one peer's messages hold at once; 0: no bound
	peerKey   func(net.Addr) string

	peerMu sync.Mutex
	peers  map[string]*peer

	resets    atomic.Int64 // streams the gate reset
	unmatched atomic.Int64 // Admit calls with no stream to decide on
	reserves  atomic.Int64 // messages reserved for, or waiting to be
	holding   atomic.Int64 // reads waiting for a message's room before its last byte
}

// peer is what one peer's connections hold.
type peer struct {
	sem   *semaphore.Weighted // first come, first served
	conns int
}

// An Option configures a Gate.
type Option func(*Gate)

// WithAdmission makes the gate reserve only for the streams admitted by
// a grpc.InTapHandle that calls Admit: a stream grpc-go refuses (no token,
// too many streams, a header list too long) is never reserved for.
// Without it, every stream is admitted.
func WithAdmission() Option { return func(g *Gate) { g.admission = true } }

// WithPeerLimit bounds what the messages of one peer hold at once, over
// its connections: key names a connection's peer from its remote address
// ("" for a peer without a bound). A message that would pass it waits for
// the peer's own to be released. A limit below what the largest message
// needs is raised to it, so that one can always arrive.
func WithPeerLimit(limit int64, key func(net.Addr) string) Option {
	return func(g *Gate) { g.peerLimit, g.peerKey = limit, key }
}

// WithArrivalTimeout bounds how long a message whose room was reserved may
// take to arrive: past d, its stream is reset and the room released.
func WithArrivalTimeout(d time.Duration) Option { return func(g *Gate) { g.arrival = d } }

// WithCompressed makes a compressed message reserve twice inflated, the
// most it may inflate to (grpc-go refuses more), instead of twice its
// length, whatever its length: grpc-go is not given its last byte before
// the room is reserved. Use it when grpc-go decompresses messages.
func WithCompressed(inflated int) Option { return func(g *Gate) { g.inflated = int64(inflated) } }

// New returns a gate that reserves from budget the messages longer than
// window, a stream's flow-control window. The overdraft is a quarter of
// the budget, reserved from it for good, so that what the gate lets in
// past a spent budget is still within the budget's limit. A budget too
// small for its quarter to hold what the largest message (maxMsg) needs
// gets an overdraft of that size on top of it instead, so that one can
// always arrive.
func New(budget *membudget.Budget, window, maxMsg int, opts ...Option) *Gate {
	overdraft := budget.Limit() / 4
	if overdraft < 2*int64(maxMsg) {
		overdraft = 2 * int64(maxMsg)
	} else if _, err := budget.Reserve(context.Background(), "the overdraft of received messages", overdraft); err != nil {
		overdraft = 2 * int64(maxMsg) // a budget already in use: on top of it
	}
	g := &Gate{budget: budget, overdraft: semaphore.NewWeighted(overdraft), overdraftLimit: overdraft, window: uint32(window), peers: map[string]*peer{}}
	for _, o := range opts {
		o(g)
	}
	if g.peerLimit > 0 {
		g.peerLimit = max(g.peerLimit, 2*int64(maxMsg), 2*g.inflated)
	}
	return g
}

// Admit tells the gate that the stream whose headers grpc-go is deciding
// on, in ctx (a grpc.InTapHandle's), is admitted, and returns ctx tagged
// with the stream: the tap must return it (or a context made from it), so
// that the gate releases a decoded message's room from its own stream's
// reservations and no other's. limit, when positive,
// bounds its messages' length below the largest message: a longer one
// resets the stream, and grpc-go is given no frame of it after the one
// that carries its length. who, when not "", names the stream's caller
// (its token): with WithPeerLimit, the caller's messages share one limit,
// whatever connections and addresses they come from, instead of their
// connection's peer's. It must be called from the tap, which grpc-go
// runs before it reads on. Without WithAdmission every stream is
// admitted already, and Admit only tags it (limit and who count only
// with WithAdmission). The room its messages reserve counts in the
// share of the budget's caller ctx names (membudget.WithCaller), when it
// names one, as its requests on their way in (membudget.Incoming): a
// caller's messages are its own work, not room no caller holds, which
// the budget's fair share leaves out of what the callers share (128
// streams of 15 MB states, reserved as no caller's, left the callers a
// share smaller than a user's 3 MB state).
func (g *Gate) Admit(ctx context.Context, limit int, who string) context.Context {
	c, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return ctx
	}
	if id := c.admitted(uint32(max(limit, 0)), who, membudget.CallerOf(ctx)); id != 0 {
		return context.WithValue(ctx, streamKey{}, id)
	}
	return ctx
}

// Tap is a tap.ServerInHandle (grpc.InTapHandle) for a server with no tap
// of its own: it admits every stream, with no limit of its own, as its
// connection's peer's. A server whose tap does not call Admit leaves its
// RPCs untagged: their messages' room is released only when their
// stream ends, never by another stream's decoded message.
func (g *Gate) Tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	return g.Admit(ctx, 0, ""), nil
}

// Resets is the number of streams the gate has reset: their message did
// not arrive in time, or was longer than their limit.
func (g *Gate) Resets() int64 { return g.resets.Load() }

// attach counts a connection of the peer key and returns the peer.
func (g *Gate) attach(key string) *peer {
	g.peerMu.Lock()
	defer g.peerMu.Unlock()
	p := g.peers[key]
	if p == nil {
		p = &peer{sem: semaphore.NewWeighted(g.peerLimit)}
		g.peers[key] = p
	}
	p.conns++
	return p
}

// detach forgets a connection of the peer key.
func (g *Gate) detach(key string, p *peer) {
	g.peerMu.Lock()
	defer g.peerMu.Unlock()
	if p.conns--; p.conns == 0 && g.peers[key] == p {
		delete(g.peers, key)
	}
}

// Overdraft is the bytes messages may hold once the budget is spent.
func (g *Gate) Overdraft() int64 { return g.overdraftLimit }

// Listener wraps each connection l accepts.
func (g *Gate) Listener(l net.Listener) net.Listener { return &listener{Listener: l, g: g} }

// Credentials wraps each connection after creds' handshake, so that the
// gate reads HTTP/2 and not TLS.
func (g *Gate) Credentials(creds credentials.TransportCredentials) credentials.TransportCredentials {
	return &transportCreds{TransportCredentials: creds, g: g}
}

// StatsHandler is the grpc.StatsHandler that tells the gate when a
// message has been decoded.
func (g *Gate) StatsHandler() stats.Handler { return statsHandler{g} }

type listener struct {
	net.Listener
	g *Gate
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.g.wrap(c), nil
}

type transportCreds struct {
	credentials.TransportCredentials
	g *Gate
}

func (t *transportCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := t.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return nil, nil, err
	}
	return t.g.wrap(c), info, nil
}

func (t *transportCreds) Clone() credentials.TransportCredentials {
	return &transportCreds{TransportCredentials: t.TransportCredentials.Clone(), g: t.g}
}

type connKey struct{}

// streamKey tags an RPC's context with its HTTP/2 stream's id (Admit).
type streamKey struct{}

type statsHandler struct{ g *Gate }

// TagConn finds the gate's connection by the local address grpc-go took
// from it, which the connection made its own (connAddr): two connections
// with the same addresses are never taken for one another.
func (h statsHandler) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if a, ok := info.LocalAddr.(*connAddr); ok && a.c.g == h.g {
		return context.WithValue(ctx, connKey{}, a.c)
	}
	return ctx
}

func (statsHandler) HandleConn(context.Context, stats.ConnStats) {}

// TagRPC gives each RPC a place for what its last message holds.
func (statsHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, rpcKey{}, &rpcHold{})
}

// HandleRPC moves what a decoded message holds to its RPC, where it stays
// until the RPC receives its next message or ends: the handler works on
// the message after grpc-go has decoded it (a state is copied and decoded
// again), and reserves for that work only when it starts.
func (h statsHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	var held []hold
	switch p := s.(type) {
	case *stats.InPayload:
		if p.Client {
			return
		}
		c, ok := ctx.Value(connKey{}).(*conn)
		id, tagged := ctx.Value(streamKey{}).(uint32)
		if ok && tagged {
			held = c.decoded(id, p.WireLength-prefixLen)
		}
	case *stats.End:
		if p.Client {
			return
		}
	default:
		return
	}
	if rh, ok := ctx.Value(rpcKey{}).(*rpcHold); ok {
		rh.mu.Lock()
		held, rh.held = rh.held, held
		rh.mu.Unlock()
	}
	h.g.release(held)
}

type rpcKey struct{}

// StreamInterceptor releases what a stream's last large message holds
// when its handler asks for the next one: it is done with it. Without
// it, that happens only when the next one has been decoded, and streams
// whose next messages wait for room that their last ones hold would wait
// for ever.
func (g *Gate) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		rh, ok := ss.Context().Value(rpcKey{}).(*rpcHold)
		if !ok {
			return handler(srv, ss)
		}
		return handler(srv, &releasingStream{ServerStream: ss, g: g, rh: rh})
	}
}

type releasingStream struct {
	grpc.ServerStream
	g  *Gate
	rh *rpcHold
}

func (s *releasingStream) RecvMsg(m any) error {
	s.rh.mu.Lock()
	held := s.rh.held
	s.rh.held = nil
	s.rh.mu.Unlock()
	s.g.release(held)
	return s.ServerStream.RecvMsg(m)
}

// rpcHold is what an RPC's last large message holds.
type rpcHold struct {
	mu   sync.Mutex
	held []hold
}

// connAddr is a gate's connection's local address: the address it
// wraps, and the connection, which the stats handler finds by it.
type connAddr struct {
	net.Addr
	c *conn
}

// HTTP/2 (RFC 9113) and gRPC framing, as much as the gate reads of them.
const (
	prefaceLen     = 24 // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", sent by the client
	headerLen      = 9  // a frame's length (3), type, flags, stream (4)
	prefixLen      = 5  // a gRPC message's compressed flag and length (4)
	windowLen      = 4  // a WINDOW_UPDATE frame's payload
	typeData       = 0x0
	typeHeaders    = 0x1
	typeRSTStream  = 0x3
	typeWindowUpd  = 0x8
	flagEndStream  = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	typeContinue   = 0x9
	rstLen         = 4 // a RST_STREAM frame's payload
	codeCancel     = 0x8
	codeCalm       = 0xb // ENHANCE_YOUR_CALM
	streamIDMask   = 1<<31 - 1
	maxTrackedSIDs = 1 << 16 // streams tracked on one connection
)

// ResetGrace is how long a connection may go on after the gate reset one
// of its streams while the client was in the middle of a frame, which the
// gate cannot cut: past it, the connection is closed.
const ResetGrace = time.Second

// frameHeader is a decoded frame header.
type frameHeader struct {
	length uint32
	typ    byte
	flags  byte
	stream uint32
}

func parseHeader(b []byte) frameHeader {
	return frameHeader{
		length: uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]),
		typ:    b[3], flags: b[4],
		stream: binary.BigEndian.Uint32(b[5:9]) & streamIDMask,
	}
}

// rstStream is a RST_STREAM frame for stream with code.
func rstStream(stream, code uint32) []byte {
	b := make([]byte, headerLen+rstLen)
	b[2] = rstLen
	b[3] = typeRSTStream
	binary.BigEndian.PutUint32(b[5:9], stream)
	binary.BigEndian.PutUint32(b[9:], code)
	return b
}

// windowUpdate is a WINDOW_UPDATE frame for stream of inc bytes.
func windowUpdate(stream, inc uint32) []byte {
	b := make([]byte, headerLen+windowLen)
	b[2] = windowLen
	b[3] = typeWindowUpd
	binary.BigEndian.PutUint32(b[5:9], stream)
	binary.BigEndian.PutUint32(b[9:], inc&streamIDMask)
	return b
}
