package server

import (
	"context"
	"strings"

	"github.com/exprd/exprd/membudget"
	"google.golang.org/grpc/tap"
)

// The server's grpc.InTapHandle. grpc-go runs it in a connection's
// reading goroutine for each new stream, once its headers are decoded
// (within --max-header-list-size) and before it reads any of its
// messages, starts its handler, or lets the receive gate reserve for it.
// What it refuses costs a HEADERS frame back and nothing more:
//
//   - with auth on, a call to any service but health and reflection needs
//     a token with the service's scope (auth.Tokens.Check): without one it is
//     refused UNAUTHENTICATED or PERMISSION_DENIED, however long the
//     message it is about to send;
//   - health and reflection need no token, so a connection holds at most
//     MaxInfraPerConn of their calls at once, and their messages are at
//     most MaxInfraMsgSize (the gate resets a stream with a longer one);
//   - any other call takes a token from its caller's rate-limit bucket
//     (the same the interceptors would take it from): a caller past its
//     rate is refused RESOURCE_EXHAUSTED before a handler starts, so that
//     opening and resetting streams at once costs a caller with a token
//     no more than one without;
//   - a call it admits (not health or reflection) proves its connection:
//     at --max-connections, a new connection takes the place of the
//     oldest that has carried none (limits.Conns);
//   - it admits the stream into the receive gate, as its token's: the
//     messages of one token share one peer's part of the budget
//     (--recv-peer-share), from however many addresses they come.
//
// The grpc-encoding of a stream is not among the headers grpc-go gives
// it; compression is refused before a message is read in compression.go.
func (s *Server) tapHandle(ctx context.Context, info *tap.Info) (context.Context, error) {
	limit, who := 0, ""
	switch {
	case isInfrastructure(info.FullMethodName):
		var err error
		if ctx, err = s.infra.Admit(ctx); err != nil {
			return nil, err
		}
		limit = MaxInfraMsgSize
	default:
		if s.opts.tokens != nil {
			c, err := s.opts.tokens.Check(ctx, info.FullMethodName)
			if err != nil {
				s.conns.RefusedCall(ctx)
				// A refused call costs what its headers took to read: it
				// is charged to its client's bucket, as a call without a
				// token is, and past that rate its connection is closed
				// (when no admitted call uses it), so that a peer with
				// no valid token cannot keep refusals coming on one.
				if rerr := s.rate.Take(s.rate.ClientKey(ctx)); rerr != nil {
					s.conns.CloseUnproven(ctx)
					return nil, rerr
				}
				return nil, err
			}
			ctx = c.With(ctx)
			who = c.Name()
		}
		key := s.rate.Caller(ctx)
		if err := s.rate.Take(key); err != nil {
			return nil, err
		}
		ctx = context.WithValue(membudget.WithCaller(ctx, key), rateTakenKey{}, true)
		s.conns.Proven(ctx)
		if smallRequest[info.FullMethodName] {
			limit = MaxSmallRequestSize
		}
	}
	if s.gate != nil {
		ctx = s.gate.Admit(ctx, limit, who) // tagged with its stream
	}
	return ctx, nil
}

// rateTakenKey marks a call whose rate-limit token the tap took: the rate
// interceptors, for calls that came by no tap, let it pass.
type rateTakenKey struct{}

func rateTaken(ctx context.Context) bool { v, _ := ctx.Value(rateTakenKey{}).(bool); return v }

// isInfrastructure reports whether fullMethod is a health check or
// reflection, which need no token.
func isInfrastructure(fullMethod string) bool {
	svc, _, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	return infraService(svc)
}

// infraService reports whether the service svc is health or reflection.
func infraService(svc string) bool {
	return svc == "grpc.health.v1.Health" || strings.HasPrefix(svc, "grpc.reflection.")
}
