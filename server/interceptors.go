package server

import (
	"context"
	"log/slog"
	"runtime/debug"

	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/server/ratelimit"
	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	grpcratelimit "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/rpcstatus"
)

// errInternal is all a client learns of a panic: no stack, path or text.
var errInternal = rpcstatus.Internal()

// recovered logs and counts a panic and returns errInternal. The stack
// goes to the server's log only.
func (s *Server) recovered(ctx context.Context, p any) error {
	s.metrics.panics.Add(ctx, 1)
	method, _ := grpc.Method(ctx)
	s.opts.logger.ErrorContext(ctx, "panic recovered", "method", method, "panic", p, "stack", string(debug.Stack()))
	return errInternal
}

// infrastructure are the services every caller may reach: health checks and
// reflection need no token and count against no rate.
func infrastructure(_ context.Context, c interceptors.CallMeta) bool {
	return infraService(c.Service)
}

func notInfrastructure(ctx context.Context, c interceptors.CallMeta) bool {
	return !infrastructure(ctx, c)
}

// rateLimited are the calls the rate interceptors limit: not
// infrastructure, and not limited by the tap already.
func rateLimited(ctx context.Context, c interceptors.CallMeta) bool {
	return !infrastructure(ctx, c) && !rateTaken(ctx)
}

// logOpts log each finished call: successes and client cancels at debug,
// the rest at the middleware's levels.
var logOpts = []logging.Option{
	logging.WithLogOnEvents(logging.FinishCall),
	logging.WithLevels(func(c codes.Code) logging.Level {
		if c == codes.OK || c == codes.Canceled {
			return logging.LevelDebug // a client that ends its stream is routine
		}
		return logging.DefaultServerCodeToLevel(c)
	}),
}

func (s *Server) logger() logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		s.opts.logger.Log(ctx, slog.Level(lvl), msg, fields...)
	})
}

// The rate limit is checked by our own two interceptors rather than
// go-grpc-middleware's, which replace the limiter's error (and its
// QuotaFailure detail) with one of their own; the limiter is still a
// ratelimit.Limiter, and both interceptors share the server's one.
var _ grpcratelimit.Limiter = (*ratelimit.Limiter)(nil)

// The chain, outermost first: recovery, final errors, logging, (streams:
// the encoding check), auth, rate limit, stream limits. Recovery is
// outermost so that a panic anywhere in the chain is contained; the final
// errors (rpcstatus.FinalUnary, FinalStream) give whatever the rest returns an ErrorInfo, and
// logging logs that. The tap (tap.go) has checked the token and taken the
// rate-limit token before any of them: auth and the rate limit here pass
// what it let in, and check a call that came by no tap. A unary call's request is read before its interceptors
// run, so its encoding is checked by its handler (compression.go).
func (s *Server) unaryInterceptors() []grpc.UnaryServerInterceptor {
	rec := recovery.WithRecoveryHandlerContext(s.recovered)
	out := []grpc.UnaryServerInterceptor{
		recovery.UnaryServerInterceptor(rec),
		rpcstatus.FinalUnary(s.opts.logger),
		logging.UnaryServerInterceptor(s.logger(), logOpts...),
	}
	if s.opts.tokens != nil {
		out = append(out, selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(s.opts.tokens.AuthFunc), selector.MatchFunc(notInfrastructure)))
	}
	return append(out, selector.UnaryServerInterceptor(s.rate.Unary(), selector.MatchFunc(rateLimited)), s.turnsUnary)
}

// turnsUnary and turnsStream put the turns programs take to compute in
// every call's context, so that other work that computes for long on the
// caller's behalf (converting a provider's document) takes them too, by
// the same caller (turns.Compute).
func (s *Server) turnsUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(turns.With(ctx, s.eval.Turns()), req)
}

func (s *Server) turnsStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	w := middleware.WrapServerStream(ss)
	w.WrappedContext = turns.With(ss.Context(), s.eval.Turns())
	return handler(srv, w)
}

func (s *Server) streamInterceptors() []grpc.StreamServerInterceptor {
	rec := recovery.WithRecoveryHandlerContext(s.recovered)
	out := []grpc.StreamServerInterceptor{
		recovery.StreamServerInterceptor(rec),
		rpcstatus.FinalStream(s.opts.logger),
		logging.StreamServerInterceptor(s.logger(), logOpts...),
		s.encodingStream(),
	}
	if s.opts.tokens != nil {
		out = append(out, selector.StreamServerInterceptor(auth.StreamServerInterceptor(s.opts.tokens.AuthFunc), selector.MatchFunc(notInfrastructure)))
	}
	// Health and reflection streams count against the streams of their
	// connection too: they are not rate limited, and need no token.
	sessionMethod := "/" + exprdv1.ExprTool_ServiceDesc.ServiceName + "/Session"
	out = append(out,
		selector.StreamServerInterceptor(s.rate.Stream(), selector.MatchFunc(rateLimited)),
		s.limits.Interceptor(sessionMethod))
	if s.gate != nil {
		out = append(out, s.gate.StreamInterceptor())
	}
	return append(out, s.turnsStream)
}
