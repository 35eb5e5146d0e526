package server

// The overload manager's interceptors (internal/overload). While the heap
// is past the manager's refuse threshold they refuse every new RPC of a
// caller that has one in flight (health checks and reflection are never
// refused): RESOURCE_EXHAUSTED, OVERLOADED, with a RetryInfo; a caller
// with none is served one call at a time. Each RPC they admit is tracked
// until its handler returns, in a context the manager cancels to shed it; one it cancelled ends
// RESOURCE_EXHAUSTED, OVERLOADED, whatever its handler returned
// (overloadStatus in errors.go). They are the innermost of the chain, so
// that the context they track is the handler's.
//
// A stream's handler sees the tracked context, and a shed stream ends at
// once with the OVERLOADED status, whatever its handler waits on (a
// Session blocked on the client's next message among them): a run
// (CodeMode, AgentLoop) and a Session alike.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/server/internal/stream"
)

// overloadInterceptors are the unary and stream interceptors of
// s.opts.overload, which must not be nil.
func (s *Server) overloadInterceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	m := s.opts.overload
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, _, done, err := m.Enter(ctx, info.FullMethod)
		if err != nil {
			return nil, overloadStatus(err)
		}
		defer done()
		resp, err := handler(ctx, req)
		if err != nil {
			if cause := context.Cause(ctx); errors.Is(cause, overload.ErrOverloaded) {
				return nil, overloadStatus(cause)
			}
		}
		return resp, err
	}
	// The handler runs in a goroutine of its own (recovered there as the
	// chain recovers it), so that a shed stream ends at once, whatever
	// its handler waits on: grpc-go gives a handler blocked in RecvMsg no
	// way out but the stream's end, which only the interceptor's return
	// brings. The handler's sends end at the shed; it lets go of what it
	// holds when its RecvMsg fails on the ended stream, and is tracked
	// until then.
	recovered := recovery.StreamServerInterceptor(recovery.WithRecoveryHandlerContext(s.recovered))
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, call, done, err := m.Enter(ss.Context(), info.FullMethod)
		if err != nil {
			return overloadStatus(err)
		}
		ts := &trackedStream{ServerStream: ss, ctx: ctx}
		ended := make(chan error, 1)
		go func() {
			defer done()
			err := recovered(srv, ts, info, handler)
			if err == nil && call.Shed() {
				// Shed before it returned: what it sent since failed, so
				// its nil must not reach the client as a stream that
				// ended well (the hostile run's big states read EOF).
				err = overloadStatus(context.Cause(ctx))
			}
			ended <- err
		}()
		select {
		case err = <-ended:
		case <-ctx.Done():
			if cause := context.Cause(ctx); errors.Is(cause, overload.ErrOverloaded) {
				var ok bool
				if ok, err = ts.endOr(ended); ok {
					return overloadStatus(cause)
				}
			} else {
				err = <-ended
			}
		}
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
// Once the stream is shed (end), what the handler sends fails: the
// stream is the interceptor's to end.
type trackedStream struct {
	grpc.ServerStream
	ctx context.Context

	mu    sync.Mutex
	ended bool
}

func (t *trackedStream) Context() context.Context { return t.ctx }

// endRetry is how often endOr tries again to end a stream whose handler
// is sending.
const endRetry = 10 * time.Millisecond

// endOr makes the handler's sends fail from now on, as soon as none is in
// flight, and reports true; or, when the handler returns first, false and
// its error. A send blocked for good (a client that reads nothing) keeps
// the stream until the handler ends, as before the shed.
func (t *trackedStream) endOr(ended <-chan error) (bool, error) {
	tick := time.NewTicker(endRetry)
	defer tick.Stop()
	for !t.mu.TryLock() {
		select {
		case err := <-ended:
			return false, err
		case <-tick.C:
		}
	}
	t.ended = true
	t.mu.Unlock()
	return true, nil
}

// sending runs send unless the stream has ended.
func (t *trackedStream) sending(send func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		if err := t.shed(); err != nil {
			return err
		}
		return stream.ErrEnded
	}
	return send()
}

func (t *trackedStream) SendMsg(m any) error {
	return t.sending(func() error { return t.ServerStream.SendMsg(m) })
}

func (t *trackedStream) SendHeader(md metadata.MD) error {
	return t.sending(func() error { return t.ServerStream.SendHeader(md) })
}

func (t *trackedStream) SetHeader(md metadata.MD) error {
	return t.sending(func() error { return t.ServerStream.SetHeader(md) })
}

func (t *trackedStream) SetTrailer(md metadata.MD) {
	_ = t.sending(func() error { t.ServerStream.SetTrailer(md); return nil })
}

// RecvMsg fails once the manager has shed the stream, before and after
// waiting; a handler blocked in it when the stream is shed sees it fail
// once the interceptor has ended the stream.
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
