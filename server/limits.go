package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/membudget"
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
	// DefaultMaxStreamsPerConn bounds the streams open at once on one
	// connection.
	DefaultMaxStreamsPerConn = 256
	// DefaultMaxSessions bounds the Session streams one replica holds.
	DefaultMaxSessions = 20_000
	// DefaultInitialWindowSize is a stream's HTTP/2 flow-control window:
	// how much a client may send that exprd has not read yet. A fixed one
	// turns off gRPC's bandwidth-delay estimate, which grows a window to
	// 16 MiB: a client that sends without reading what it is sent (so
	// that exprd stops reading it) could park that much on every stream.
	DefaultInitialWindowSize = 1 << 20
	// DefaultInitialConnWindowSize is a connection's flow-control window,
	// shared by its streams.
	DefaultInitialConnWindowSize = 16 << 20
)

// The subjects of QuotaFailure violations, one per limit.
const (
	quotaStateBytes      = "max_state_bytes"
	quotaStateContainers = "max_state_containers"
	quotaStateDepth      = "max_state_depth"
	quotaSlowReader      = "slow_reader_timeout"
	quotaCallsInFlight   = "max_calls_in_flight"
	quotaStreamsPerCon   = "max_streams_per_connection"
	quotaSessions        = "max_sessions"
	quotaRate            = "rate_limit"
	quotaMemoryBudget    = "memory_budget"
)

// quotaFailure is the detail of a ResourceExhausted: which limit, and what.
func quotaFailure(subject, desc string) *errdetails.QuotaFailure {
	return &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: subject, Description: desc}}}
}

// streamLimits admits a stream only while its connection and the replica
// are under their limits.
type streamLimits struct {
	perConn  int
	sessions int

	mu    sync.Mutex
	conns map[string]int // open streams by connection (the peer's address)
	open  atomic.Int64   // open Session streams
}

func newStreamLimits(perConn, sessions int) *streamLimits {
	return &streamLimits{perConn: perConn, sessions: sessions, conns: map[string]int{}}
}

func (l *streamLimits) interceptor(sessionMethod string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		key := connKey(ss.Context())
		l.mu.Lock()
		if l.conns[key] >= l.perConn {
			l.mu.Unlock()
			return exhausted(quotaStreamsPerCon, fmt.Sprintf("%d streams are open on this connection, the limit", l.perConn))
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
				return exhausted(quotaSessions, fmt.Sprintf("this replica holds %d sessions, the limit; try another", l.sessions))
			}
			defer l.open.Add(-1)
		}
		return handler(srv, ss)
	}
}

func connKey(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		return a.String()
	}
	return p.Addr.Network() + ":" + p.Addr.String()
}

// stateQuota is the QuotaFailure subject of a state refused for a limit
// (its bytes, its objects and arrays, its depth); ok is false for any other
// refusal.
func stateQuota(err error) (subject string, ok bool) {
	var spent *membudget.ExhaustedError
	if errors.As(err, &spent) {
		return quotaMemoryBudget, true
	}
	var big *evaluator.StateTooLargeError
	if !errors.As(err, &big) {
		return "", false
	}
	switch big.What {
	case "containers":
		return quotaStateContainers, true
	case "depth":
		return quotaStateDepth, true
	}
	return quotaStateBytes, true
}

// stateStatus is the status of a refused state: too large is
// RESOURCE_EXHAUSTED with a QuotaFailure (and a RetryInfo when the memory
// budget is only busy), anything else INVALID_ARGUMENT on field.
func stateStatus(field string, err error) error {
	var spent *membudget.ExhaustedError
	if errors.As(err, &spent) {
		return memoryStatus(spent)
	}
	subject, ok := stateQuota(err)
	if !ok {
		return badRequest(field, err.Error())
	}
	return exhausted(subject, err.Error())
}

// memoryStatus is the status of what the memory budget could not hold:
// RESOURCE_EXHAUSTED with a QuotaFailure, and a RetryInfo when the budget
// is only busy.
func memoryStatus(spent *membudget.ExhaustedError) error {
	if spent.Unreachable {
		return exhausted(quotaMemoryBudget, spent.Error())
	}
	return exhausted(quotaMemoryBudget, spent.Error(), retryInfo(defaultRetryDelay))
}
