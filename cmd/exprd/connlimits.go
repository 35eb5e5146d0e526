package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/exprd/exprd/server"
)

// connLimitsConfig is the flags of what a connection may hold before any
// token is checked (server.DefaultMaxHeaderListSize and the rest).
type connLimitsConfig struct {
	maxHeaderListSize   int
	unaryStreamsPerConn int
	connectionTimeout   time.Duration
	maxConnsPerPeer     int
	maxConns            int
	recvMsgTimeout      time.Duration
	recvPeerShare       float64
	acceptCompressed    bool
}

func (c *connLimitsConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.maxHeaderListSize, "max-header-list-size", server.DefaultMaxHeaderListSize, "bytes of one request's headers, as HTTP/2 counts them (each field's name and value and 32); a stream past it is reset before any of it is kept (at least 1024)")
	fs.IntVar(&c.unaryStreamsPerConn, "unary-streams-per-connection", server.DefaultUnaryStreamsPerConn, "HTTP/2 streams of a connection for unary RPCs beyond --max-streams-per-connection: its SETTINGS_MAX_CONCURRENT_STREAMS is the sum")
	fs.DurationVar(&c.connectionTimeout, "connection-timeout", server.DefaultConnectionTimeout, "how long a new connection's handshake (TLS, the HTTP/2 preface and SETTINGS) may take")
	fs.IntVar(&c.maxConnsPerPeer, "max-connections-per-peer", server.DefaultMaxConnsPerPeer, "connections open at once from one address (an IPv6 one by its /64; --trusted-proxies have no such bound); one past it is closed when accepted")
	fs.IntVar(&c.maxConns, "max-connections", 0, "connections open at once in all; one past it is closed when accepted (0: one for 2 MiB of --memory-budget, at least 64 and at most 10,000, server.MaxConnsFor)")
	fs.DurationVar(&c.recvMsgTimeout, "recv-msg-timeout", server.DefaultRecvMsgTimeout, "how long a message longer than --stream-window may take to arrive once the memory budget has room for it; past it the stream is reset (RESOURCE_EXHAUSTED) and the room given back")
	fs.Float64Var(&c.recvPeerShare, "recv-peer-share", server.DefaultRecvPeerShare, "the part of the memory budget the messages one client (a token; with auth off, an address) is sending may hold at once (at least one largest message); its others wait. 1: no bound but the budget")
	fs.BoolVar(&c.acceptCompressed, "accept-compressed", false, "take messages compressed with gzip (grpc-encoding), each reserved at twice --max-recv-msg-size before it is inflated (default: a call with a grpc-encoding other than identity is refused UNIMPLEMENTED before its message is read)")
}

// validate wants each limit in its range, naming its flag.
func (c connLimitsConfig) validate() error {
	var errs []error
	for _, f := range []struct {
		flag string
		ok   bool
		v    any
		want string
	}{
		{"max-header-list-size", c.maxHeaderListSize >= 1<<10 && c.maxHeaderListSize <= 1<<31, c.maxHeaderListSize, "at least 1024"},
		{"unary-streams-per-connection", c.unaryStreamsPerConn > 0, c.unaryStreamsPerConn, "a positive value"},
		{"connection-timeout", c.connectionTimeout > 0, c.connectionTimeout, "a positive duration"},
		{"max-connections-per-peer", c.maxConnsPerPeer > 0, c.maxConnsPerPeer, "a positive value"},
		{"max-connections", c.maxConns >= 0, c.maxConns, "a positive value, or 0 for one for 2 MiB of the memory budget"},
		{"recv-msg-timeout", c.recvMsgTimeout > 0, c.recvMsgTimeout, "a positive duration"},
		{"recv-peer-share", c.recvPeerShare > 0 && c.recvPeerShare <= 1, c.recvPeerShare, "more than 0 and at most 1"},
	} {
		if !f.ok {
			errs = append(errs, fmt.Errorf("%s: %v, want %s", f.flag, f.v, f.want))
		}
	}
	return errors.Join(errs...)
}

// options are the server's options for the limits, for a memory budget
// of budget bytes.
func (c connLimitsConfig) options(budget int64) []server.Option {
	maxConns := c.maxConns
	if maxConns == 0 {
		maxConns = server.MaxConnsFor(budget)
	}
	opts := []server.Option{
		server.WithMaxHeaderListSize(c.maxHeaderListSize),
		server.WithUnaryStreamsPerConn(c.unaryStreamsPerConn),
		server.WithConnectionTimeout(c.connectionTimeout),
		server.WithMaxConns(c.maxConnsPerPeer, maxConns),
		server.WithRecvMsgTimeout(c.recvMsgTimeout),
		server.WithRecvPeerShare(c.recvPeerShare),
	}
	if c.acceptCompressed {
		opts = append(opts, server.WithCompressedMessages())
	}
	return opts
}
