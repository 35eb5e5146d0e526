package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// DefaultMaxCallsInFlight bounds the calls running at once on one stream.
const DefaultMaxCallsInFlight = 64

// Server is exprd's gRPC server: ExprTool, grpc.health.v1 and reflection.
type Server struct {
	exprdv1.UnimplementedExprToolServer
	opts   options
	eval   *evaluator.Evaluator
	grpc   *grpc.Server
	health *health.Server
}

type options struct {
	budgets          evaluator.Budgets
	functions        map[string]evaluator.Function
	initialState     *evaluator.State
	cacheSize        int
	maxCallsInFlight int
	logger           *slog.Logger
	grpcOpts         []grpc.ServerOption
}

// Option configures a Server.
type Option func(*options) error

// WithBudgets sets the maxima sessions may lower (default
// evaluator.DefaultBudgets()); each must be positive.
func WithBudgets(b evaluator.Budgets) Option {
	return func(o *options) error {
		if err := b.Validate(); err != nil {
			return err
		}
		o.budgets = b
		return nil
	}
}

// WithFunctions adds server-run functions that sessions may declare with
// RUNNER_SERVER (default: none).
func WithFunctions(fns ...evaluator.Function) Option {
	return func(o *options) error {
		for _, f := range fns {
			if f.Impl == nil {
				return fmt.Errorf("server function %q has no implementation", f.Name)
			}
			if _, dup := o.functions[f.Name]; dup {
				return fmt.Errorf("server function %q is given twice", f.Name)
			}
			f.Runner = evaluator.RunServer
			o.functions[f.Name] = f
		}
		return nil
	}
}

// WithInitialState sets the state a new session starts from before its
// first State (default {}).
func WithInitialState(stateJSON []byte) Option {
	return func(o *options) error {
		st := evaluator.NewState()
		if err := st.Replace(stateJSON); err != nil {
			return fmt.Errorf("initial state: %w", err)
		}
		o.initialState = st
		return nil
	}
}

// WithCacheSize bounds the compile cache (default
// evaluator.DefaultCompileCacheSize).
func WithCacheSize(n int) Option {
	return func(o *options) error { o.cacheSize = n; return nil }
}

// WithMaxCallsInFlight bounds the calls running at once on one stream
// (default DefaultMaxCallsInFlight).
func WithMaxCallsInFlight(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("max calls in flight %d: want at least 1", n)
		}
		o.maxCallsInFlight = n
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.logger = l; return nil }
}

// WithGRPCOptions passes options to grpc.NewServer.
func WithGRPCOptions(opts ...grpc.ServerOption) Option {
	return func(o *options) error { o.grpcOpts = append(o.grpcOpts, opts...); return nil }
}

// New returns a Server with its services registered.
func New(opts ...Option) (*Server, error) {
	o := options{
		budgets:          evaluator.DefaultBudgets(),
		functions:        map[string]evaluator.Function{},
		cacheSize:        evaluator.DefaultCompileCacheSize,
		maxCallsInFlight: DefaultMaxCallsInFlight,
		logger:           slog.Default(),
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	ev, err := evaluator.New(evaluator.WithCacheSize(o.cacheSize))
	if err != nil {
		return nil, err
	}
	if o.initialState == nil {
		o.initialState = evaluator.NewState()
	}
	s := &Server{opts: o, eval: ev, grpc: grpc.NewServer(o.grpcOpts...), health: health.NewServer()}
	exprdv1.RegisterExprToolServer(s.grpc, s)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.health.SetServingStatus(exprdv1.ExprTool_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return s, nil
}

// Serve serves on lis until Shutdown or Stop.
func (s *Server) Serve(lis net.Listener) error {
	err := s.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown turns health to NOT_SERVING, refuses new streams and waits for
// open ones until ctx ends; then it stops them.
func (s *Server) Shutdown(ctx context.Context) {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
}

// Stop stops the server at once.
func (s *Server) Stop() { s.grpc.Stop() }

// Evaluator returns the server's evaluator (for its cache counters).
func (s *Server) Evaluator() *evaluator.Evaluator { return s.eval }
