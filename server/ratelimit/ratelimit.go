// Package ratelimit is exprd's rate limit: a token bucket per caller (the
// authenticated caller's name, or the client's address when auth is off,
// an IPv6 address by its /64), in a bounded LRU. One Limiter serves a
// server: its tap takes a call's token before a handler starts (Take), its
// unary and stream interceptors check the calls that came by no tap
// (Unary, Stream), and the MCP endpoint draws on the same buckets.
package ratelimit

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/server/auth"
	"github.com/exprd/exprd/server/internal/rpcstatus"
)

// DefaultMaxBuckets bounds the callers the rate limiter remembers. A
// caller's key is chosen by the client (its address, or a name with auth
// on), so the buckets are a bounded LRU: past the bound the caller seen
// least recently is forgotten, and its next RPC starts from a full bucket.
// A key is found and added in O(1) however many callers there are.
const DefaultMaxBuckets = 65_536

// Limiter is a token bucket per caller: the authenticated caller's
// name, or the client's address when auth is off (an IPv6 address by its
// /64, the block one host is usually given). It is go-grpc-middleware's
// ratelimit.Limiter, checked before a handler (and so a stream's work)
// starts. A server has one, which its unary and its stream interceptor
// share: a caller's unary RPCs and streams draw on one bucket.
type Limiter struct {
	rate    rate.Limit
	burst   int
	proxies []netip.Prefix // peers whose x-forwarded-for is believed

	mu      sync.Mutex // makes a bucket's lookup and creation one step
	buckets *lru.Cache[string, *rate.Limiter]
}

func New(perSecond float64, burst, maxBuckets int, proxies []netip.Prefix) *Limiter {
	buckets, err := lru.New[string, *rate.Limiter](maxBuckets)
	if err != nil {
		panic(err) // maxBuckets is checked positive by its option
	}
	return &Limiter{rate: rate.Limit(perSecond), burst: burst, proxies: proxies, buckets: buckets}
}

func (l *Limiter) Limit(ctx context.Context) error {
	return l.Take(l.Caller(ctx))
}

// Caller is the bucket of the caller of ctx's RPC: its name when it
// authenticated, else its address (clientKey).
func (l *Limiter) Caller(ctx context.Context) string {
	if name := auth.CallerName(ctx); name != "" {
		return name
	}
	return l.ClientKey(ctx)
}

// Take takes a token from key's bucket, or says how long until it has one.
func (l *Limiter) Take(key string) error {
	if wait, ok := l.TakeKey(key); !ok {
		return rpcstatus.Exhausted(rpcstatus.QuotaRate, fmt.Sprintf("over %v requests per second (burst %d) for this caller", float64(l.rate), l.burst),
			rpcstatus.Retry(wait))
	}
	return nil
}

// TakeKey takes a token from key's bucket, or says how long until it has
// one.
func (l *Limiter) TakeKey(key string) (wait time.Duration, ok bool) {
	now := time.Now()
	l.mu.Lock()
	lim, found := l.buckets.Get(key)
	if !found {
		lim = rate.NewLimiter(l.rate, l.burst)
		l.buckets.Add(key, lim)
	}
	l.mu.Unlock()
	if !lim.AllowN(now, 1) {
		return l.untilToken(lim, now), false
	}
	return 0, true
}

// untilToken is how long until lim holds a token again, at least a
// millisecond.
func (l *Limiter) untilToken(lim *rate.Limiter, now time.Time) time.Duration {
	if l.rate <= 0 {
		return rpcstatus.DefaultRetryDelay
	}
	wait := time.Duration((1 - lim.TokensAt(now)) / float64(l.rate) * float64(time.Second))
	return max(wait.Round(time.Millisecond), time.Millisecond)
}

// Unary admits a unary RPC when its caller's bucket has a token, and
// names the caller to the evaluator, whose programs take turns by caller.
func (l *Limiter) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		key := l.Caller(ctx)
		if err := l.Take(key); err != nil {
			return nil, err
		}
		return handler(membudget.WithCaller(ctx, key), req)
	}
}

// Stream admits a stream when its caller's bucket has a token (the same
// bucket as the caller's unary RPCs), and names the caller as unary does.
func (l *Limiter) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		key := l.Caller(ss.Context())
		if err := l.Take(key); err != nil {
			return err
		}
		w := middleware.WrapServerStream(ss)
		w.WrappedContext = membudget.WithCaller(ss.Context(), key)
		return handler(srv, w)
	}
}

// ClientKey is the bucket of an unauthenticated caller: the client's
// address, an IPv6 one by its /64. The client is the peer, unless the peer
// is a trusted proxy: then it is the last address of x-forwarded-for that
// is not a trusted proxy itself (an untrusted peer's header is ignored: it
// could name anyone).
func (l *Limiter) ClientKey(ctx context.Context) string {
	addr, ok := PeerAddr(ctx)
	if !ok {
		return ""
	}
	md, _ := metadata.FromIncomingContext(ctx)
	return l.AddrClient(addr, md.Get("x-forwarded-for"))
}

// AddrClient is ClientKey's bucket of a peer's address and the values of
// its x-forwarded-for.
func (l *Limiter) AddrClient(addr netip.Addr, forwarded []string) string {
	if l.Trusted(addr) {
		hops := strings.Split(strings.Join(forwarded, ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a hop we cannot read: stop at the last one we could
			}
			addr = a.Unmap()
			if !l.Trusted(addr) {
				break
			}
		}
	}
	return AddrKey(addr)
}

func (l *Limiter) Trusted(a netip.Addr) bool {
	for _, p := range l.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// AddrKey is an address's bucket: an IPv4 address itself, an IPv6 one its
// /64.
func AddrKey(a netip.Addr) string {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// PeerAddr is the address of ctx's peer, without its zone, IPv4 unmapped.
func PeerAddr(ctx context.Context) (netip.Addr, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().WithZone("").Unmap(), true
}
