package server

// The overload manager's interceptors (internal/overload). While the heap
// is past the manager's refuse threshold they refuse every new RPC but
// health checks and reflection: RESOURCE_EXHAUSTED, OVERLOADED, with a
// RetryInfo. Each RPC they admit is tracked until its handler returns,
// in a context the manager cancels to shed it; one it cancelled ends
// RESOURCE_EXHAUSTED, OVERLOADED, whatever its handler returned
// (overloadStatus in errors.go). They are the innermost of the chain, so
// that the context they track is the handler's.
//
// A stream's handler sees the tracked context, and a shed stream's
// RecvMsg fails with the OVERLOADED status: a run (CodeMode, AgentLoop)
// ends at once, a Session's calls at once and the Session itself at the
// client's next message, the first it cannot take.

import (
	"context"
	"errors"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"

	"github.com/exprd/exprd/internal/overload"
)

// quotaOverload is the QuotaFailure subject of the overload manager's
// statuses.
const quotaOverload = "overload"

// overloadInterceptors are the unary and stream interceptors of
// s.opts.overload, which must not be nil.
func (s *Server) overloadInterceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	m := s.opts.overload
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := m.Admit(); err != nil {
			return nil, overloadStatus(err)
		}
		ctx, _, done := m.Track(ctx, info.FullMethod)
		defer done()
		resp, err := handler(ctx, req)
		if err != nil {
			if cause := context.Cause(ctx); errors.Is(cause, overload.ErrOverloaded) {
				return nil, overloadStatus(cause)
			}
		}
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := m.Admit(); err != nil {
			return overloadStatus(err)
		}
		ctx, _, done := m.Track(ss.Context(), info.FullMethod)
		defer done()
		err := handler(srv, &trackedStream{ServerStream: ss, ctx: ctx})
		if err != nil {
			if cause := context.Cause(ctx); errors.Is(cause, overload.ErrOverloaded) {
				return overloadStatus(cause)
			}
		}
		return err
	}
	match := selector.MatchFunc(notInfrastructure)
	return selector.UnaryServerInterceptor(unary, match), selector.StreamServerInterceptor(stream, match)
}

// trackedStream is a stream whose handler works in the tracked context.
type trackedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (t *trackedStream) Context() context.Context { return t.ctx }

// RecvMsg fails once the manager has shed the stream, before and after
// waiting: a handler blocked in it (a Session's) ends at the client's next
// message.
func (t *trackedStream) RecvMsg(m any) error {
	if err := t.shed(); err != nil {
		return err
	}
	if err := t.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return t.shed()
}

func (t *trackedStream) shed() error {
	if t.ctx.Err() == nil {
		return nil
	}
	if cause := context.Cause(t.ctx); errors.Is(cause, overload.ErrOverloaded) {
		return overloadStatus(cause)
	}
	return nil
}
