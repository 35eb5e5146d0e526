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
// So the memory of messages being received is bounded by the budget, the
// overdraft, and one flow-control window per open stream, instead of one
// largest message per open stream.
package recvgate

import (
	"context"
	"encoding/binary"
	"net"
	"sync"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/stats"

	"github.com/exprd/exprd/membudget"
)

// What a reservation is for, as the budget names it.
const what = "a received message"

// Gate admits the large messages of the connections it wraps.
type Gate struct {
	budget         *membudget.Budget
	overdraft      *semaphore.Weighted // first come, first served
	overdraftLimit int64
	window         uint32 // messages longer than this are admitted
	conns          sync.Map
}

// New returns a gate that reserves from budget the messages longer than
// window, a stream's flow-control window. The overdraft is a quarter of
// the budget, reserved from it for good, so that what the gate lets in
// past a spent budget is still within the budget's limit. A budget too
// small for its quarter to hold what the largest message (maxMsg) needs
// gets an overdraft of that size on top of it instead, so that one can
// always arrive.
func New(budget *membudget.Budget, window, maxMsg int) *Gate {
	overdraft := budget.Limit() / 4
	if overdraft < 2*int64(maxMsg) {
		overdraft = 2 * int64(maxMsg)
	} else if _, err := budget.Reserve(context.Background(), "the overdraft of received messages", overdraft); err != nil {
		overdraft = 2 * int64(maxMsg) // a budget already in use: on top of it
	}
	return &Gate{budget: budget, overdraft: semaphore.NewWeighted(overdraft), overdraftLimit: overdraft, window: uint32(window)}
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

type statsHandler struct{ g *Gate }

func (h statsHandler) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	if v, ok := h.g.conns.Load(addrKey(info.LocalAddr, info.RemoteAddr)); ok {
		return context.WithValue(ctx, connKey{}, v)
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
		if c, ok := ctx.Value(connKey{}).(*conn); ok {
			held = c.decoded(p.WireLength - prefixLen)
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

func addrKey(local, remote net.Addr) string {
	if local == nil || remote == nil {
		return ""
	}
	return local.String() + " " + remote.String()
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
	flagPadded     = 0x8
	streamIDMask   = 1<<31 - 1
	maxTrackedSIDs = 1 << 16 // streams tracked on one connection
)

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

// windowUpdate is a WINDOW_UPDATE frame for stream of inc bytes.
func windowUpdate(stream, inc uint32) []byte {
	b := make([]byte, headerLen+windowLen)
	b[2] = windowLen
	b[3] = typeWindowUpd
	binary.BigEndian.PutUint32(b[5:9], stream)
	binary.BigEndian.PutUint32(b[9:], inc&streamIDMask)
	return b
}
