package server

import (
	"time"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/stream"
)

// The server's limits. Each is a named default, set by an Option; a request
// over one gets ResourceExhausted with a QuotaFailure naming it, except a
// message over DefaultMaxRecvMsgSize (below).
const (
	// DefaultMaxRecvMsgSize bounds one received message: a state snapshot
	// must fit. grpc-go enforces it while decoding: a unary RPC fails with
	// its ResourceExhausted "grpc: received message larger than max (N vs.
	// M)", without details, before any interceptor runs; on a stream, Recv
	// returns that error and the handler ends the stream with it.
	DefaultMaxRecvMsgSize = 16 << 20
	// DefaultMaxStateBytes bounds a session's state, as bytes of JSON.
	DefaultMaxStateBytes = 16 << 20
	// DefaultMaxStreamsPerConn bounds the streaming RPCs open at once on
	// one connection, health watches and reflection among them; the
	// connection's HTTP/2 streams are this and DefaultUnaryStreamsPerConn.
	DefaultMaxStreamsPerConn = 256
	// DefaultMaxSessions bounds the Session streams one replica holds.
	DefaultMaxSessions = 20_000
	// DefaultInitialWindowSize is a stream's HTTP/2 flow-control window:
	// how much a client may send that exprd has not read yet, which no
	// budget counts. A fixed one turns off gRPC's bandwidth-delay
	// estimate, which grows a window to 16 MiB: a client that sends
	// without reading what it is sent (so that exprd stops reading it)
	// could park that much on every stream. gRPC's least, 64 KiB: at
	// 1 MiB, 64 such streams parked 86 MB of calls in gRPC's buffers. A
	// longer message still comes at once (gRPC opens the window to its
	// length when the handler asks for it).
	DefaultInitialWindowSize = 64 << 10
	// DefaultInitialConnWindowSize is a connection's flow-control window,
	// shared by its streams.
	DefaultInitialConnWindowSize = 16 << 20
)

// The connection's limits, before any token is checked: what a peer that
// has none can make the server hold (docs/security.md, "Before a token is
// checked").
const (
	// DefaultMaxHeaderListSize bounds the headers of one request, counted
	// as HTTP/2 counts them (each field's name and value, and 32 bytes):
	// grpc-go resets a stream past it (FRAME_SIZE_ERROR) without keeping
	// its fields. A grpc-go call with a token and a trace context sends
	// 603 bytes (measured), and grpc-go's own clients will not take more
	// than 8 KiB back; grpc-go's default, 16 MiB, let 60 streams of one
	// 4.4 KB HEADERS frame each (one field repeated by HPACK index) hold
	// 976 MiB.
	DefaultMaxHeaderListSize = 16 << 10
	// DefaultUnaryStreamsPerConn is the HTTP/2 streams a connection has for
	// unary RPCs beyond DefaultMaxStreamsPerConn: its
	// SETTINGS_MAX_CONCURRENT_STREAMS is the sum, so that a client whose
	// streaming RPCs are at their limit can still make unary ones. A
	// client past it waits for a stream of its own connection (grpc-go's
	// does), and grpc-go runs at most that many handlers of a connection
	// at once, which bounds a rapid-reset flood's.
	DefaultUnaryStreamsPerConn = 64
	// DefaultConnectionTimeout bounds a new connection's handshake: TLS,
	// the HTTP/2 preface and the client's SETTINGS (grpc-go's default is
	// 120 s).
	DefaultConnectionTimeout = 10 * time.Second
	// DefaultMaxConnsPerPeer bounds the connections open at once from one
	// peer: an IPv4 address, an IPv6 /64 (a trusted proxy has no such
	// bound). One past it is closed as soon as it is accepted.
	DefaultMaxConnsPerPeer = 128
	// DefaultMaxConns bounds the connections open at once in all, when
	// no memory budget says otherwise (MaxConnsFor).
	DefaultMaxConns = 10_000
	// ConnMemory is what MaxConnsFor allows a connection of the memory
	// budget: four times what one may hold before its token is checked,
	// at most (measured: about 0.5 MiB, a connection with its 8 health
	// watches; 46 KiB idle), so that connections before auth hold at most
	// a quarter of the budget beside it, the margin between the budget
	// and the line an overload manager and the hostile run hold RSS under.
	ConnMemory = 2 << 20
	// MinConns is the least MaxConnsFor allows, however small the budget.
	MinConns = 64
	// DefaultRecvMsgTimeout bounds how long a message longer than a
	// stream's window may take to arrive once the memory budget has room
	// for it: past it, the stream is reset (RST_STREAM ENHANCE_YOUR_CALM,
	// which a client reads as RESOURCE_EXHAUSTED) and the room given back.
	// 16 MiB in 30 s is 560 KB/s.
	DefaultRecvMsgTimeout = 30 * time.Second
	// DefaultRecvPeerShare is the part of the memory budget that the
	// messages one peer is sending may hold at once (at least what one
	// largest message needs); its further ones wait for its own.
	DefaultRecvPeerShare = 0.25
	// MaxInfraPerConn bounds the health and reflection calls open at once
	// on one connection: they need no token. A client checks its health
	// with one Watch, or a Check at a time.
	MaxInfraPerConn = 8
	// MaxInfraMsgSize bounds a health or reflection request (a service or
	// symbol name): a stream with a longer one is reset before more than
	// the frame that carries its length reaches grpc-go.
	MaxInfraMsgSize = 16 << 10
	// MaxSmallRequestSize bounds the requests of the methods that carry
	// only names, a query and a page token (smallRequest): a stream with
	// a longer one is reset before more than the frame that carries its
	// length reaches grpc-go. Under the server-wide bound
	// (--max-recv-msg-size) such a request was read and copied whole
	// before its handler refused it: in the hostile mix, 32 clients
	// sending 10 MB search queries made a third of what exprd allocated.
	MaxSmallRequestSize = 64 << 10
)

// smallRequest is the methods whose requests are at most
// MaxSmallRequestSize: a search query (at most 4,096 bytes), a manual's or
// a turn's name, a page token.
var smallRequest = map[string]bool{
	exprdv1.ToolRegistry_SearchTools_FullMethodName:      true,
	exprdv1.ToolRegistry_ListTools_FullMethodName:        true,
	exprdv1.ToolRegistry_DeregisterManual_FullMethodName: true,
	exprdv1.AgentLoop_Cancel_FullMethodName:              true,
}

// MaxConnsFor is the connections a server with a memory budget of budget
// bytes may hold open at once: one ConnMemory of the budget each, at least
// MinConns and at most DefaultMaxConns (budget 0: DefaultMaxConns), so
// that what connections hold before any token is checked is at most a
// quarter of the budget by construction (128 connections for a budget of
// 256 MiB).
func MaxConnsFor(budget int64) int {
	if budget <= 0 {
		return DefaultMaxConns
	}
	return int(min(max(budget/ConnMemory, MinConns), DefaultMaxConns))
}

// Outbound limits of a stream (Session, CodeMode.Run, AgentLoop.Run): its
// queue of messages to send (server/internal/stream's Outbox).
const (
	// OutboxFreeBytes is what a stream's queue may hold without reserving
	// it from the memory budget: what a client that reads keeps queued.
	OutboxFreeBytes = stream.FreeBytes
	// DefaultOutboxBytes bounds the bytes queued for a stream; one message
	// larger than it is queued alone. Past it the stream's producers wait.
	DefaultOutboxBytes = 1 << 20
	// DefaultSlowReaderTimeout is how long a stream's queue may stay full
	// before its client counts as not reading: then the stream ends
	// RESOURCE_EXHAUSTED (slow_reader_timeout).
	DefaultSlowReaderTimeout = 10 * time.Second
)
