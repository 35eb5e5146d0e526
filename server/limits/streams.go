package limits

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/exprd/exprd/server/internal/rpcstatus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// Streams admits a stream only while its connection and the replica
// are under their limits.
type Streams struct {
	perConn  int
	sessions int

	mu    sync.Mutex
	conns map[string]int // open streams by connection (the peer's address)
	open  atomic.Int64   // open Session streams
}

// NewStreams bounds the streams of a connection at perConn and the
// Session streams of the replica at sessions.
func NewStreams(perConn, sessions int) *Streams {
	return &Streams{perConn: perConn, sessions: sessions, conns: map[string]int{}}
}

// Interceptor admits a stream within the limits (a call to
// sessionMethod counts as a Session), or refuses it RESOURCE_EXHAUSTED
// naming the limit; the stream counts until its handler returns.
func (l *Streams) Interceptor(sessionMethod string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		key := ConnKey(ss.Context())
		l.mu.Lock()
		if l.conns[key] >= l.perConn {
			l.mu.Unlock()
			return rpcstatus.Exhausted(rpcstatus.QuotaStreamsPerConn, fmt.Sprintf("%d streams are open on this connection, the limit", l.perConn))
		}
		l.conns[key]++
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			if l.conns[key]--; l.conns[key] == 0 {
				delete(l.conns, key)
			}
			l.mu.Unlock()
		}()
		if info.FullMethod == sessionMethod {
			if n := l.open.Add(1); n > int64(l.sessions) {
				l.open.Add(-1)
				return rpcstatus.Exhausted(rpcstatus.QuotaSessions, fmt.Sprintf("this replica holds %d sessions, the limit; try another", l.sessions))
			}
			defer l.open.Add(-1)
		}
		return handler(srv, ss)
	}
}

// ConnKey names ctx's connection by its remote address (RemoteKey), ""
// without one.
func ConnKey(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	return RemoteKey(p.Addr)
}

// RemoteKey names a connection by its remote address, as ConnKey does
// from a call's context: the connection limiter finds the connection a
// call proves by it.
func RemoteKey(a net.Addr) string {
	if a == nil {
		return ""
	}
	if t, ok := a.(*net.TCPAddr); ok {
		return t.String()
	}
	return a.Network() + ":" + a.String()
}
