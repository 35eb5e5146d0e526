package server

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// callerLimiter is a token bucket per caller: the authenticated caller's
// name, or the peer's IP when auth is off. It is go-grpc-middleware's
// ratelimit.Limiter, checked before a handler (and so a stream's work)
// starts. A server has one, which its unary and its stream interceptor
// share: a caller's unary RPCs and streams draw on one bucket.
type callerLimiter struct {
	rate  rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// idleBucket is how long an unused bucket is kept.
const idleBucket = 10 * time.Minute

func newCallerLimiter(perSecond float64, burst int) *callerLimiter {
	return &callerLimiter{rate: rate.Limit(perSecond), burst: burst, buckets: map[string]*bucket{}}
}

func (l *callerLimiter) Limit(ctx context.Context) error {
	key := callerName(ctx)
	if key == "" {
		key = peerIP(ctx)
	}
	now := time.Now()
	l.mu.Lock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) > 10_000 {
			for k, old := range l.buckets {
				if now.Sub(old.seen) > idleBucket {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[key] = b
	}
	b.seen = now
	allowed := b.lim.AllowN(now, 1)
	l.mu.Unlock()
	if !allowed {
		return exhausted(quotaRate, fmt.Sprintf("over %v requests per second (burst %d) for this caller", float64(l.rate), l.burst))
	}
	return nil
}

// unary admits a unary RPC when its caller's bucket has a token.
func (l *callerLimiter) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := l.Limit(ctx); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// stream admits a stream when its caller's bucket has a token: the same
// bucket as the caller's unary RPCs.
func (l *callerLimiter) stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := l.Limit(ss.Context()); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

func peerIP(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
		return host
	}
	return p.Addr.String()
}
