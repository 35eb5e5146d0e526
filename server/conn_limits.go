package server

import (
	"fmt"
	"math"
	"net"
	"time"

	"github.com/exprd/exprd/internal/recvgate"
	"github.com/exprd/exprd/server/limits"
)

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
		opts = append(opts, recvgate.WithPeerLimit(limit, func(a net.Addr) string { return limits.PeerKey(a, s.rate.Trusted) }))
	}
	if o.compressed {
		opts = append(opts, recvgate.WithCompressed(s.opts.maxRecvMsgSize))
	}
	return opts
}
