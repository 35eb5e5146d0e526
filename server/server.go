package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/internal/recvgate"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/server/auth"
	"github.com/exprd/exprd/server/limits"
	"github.com/exprd/exprd/server/ratelimit"
	"github.com/exprd/exprd/toolstore"
	"github.com/exprd/exprd/turnstore"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/userinput"
)

// DefaultMaxCallsInFlight bounds the calls running at once on one stream.
const DefaultMaxCallsInFlight = 64

// Keepalive defaults: clients may ping at most every MinPingInterval;
// connections live at most MaxConnectionAge, then get MaxConnectionAgeGrace
// to finish their streams, so long streams move to new replicas.
const (
	DefaultMinPingInterval       = 10 * time.Second
	DefaultMaxConnectionAge      = 30 * time.Minute
	DefaultMaxConnectionAgeGrace = 5 * time.Minute
	DefaultKeepaliveTime         = 2 * time.Minute
	DefaultKeepaliveTimeout      = 20 * time.Second
)

// Rate limit defaults: RPCs started per second per caller, and the burst.
const (
	DefaultRatePerSecond = 1000
	DefaultRateBurst     = 2000
)

// Server is exprd's gRPC server. It holds what the services share (the
// options, the evaluator, telemetry, limits) and wires them: ExprTool,
// CodeMode and ToolRegistry (with a UTCP registry), AgentLoop,
// grpc.health.v1 and reflection.
type Server struct {
	opts    options
	eval    *evaluator.Evaluator
	grpc    *grpc.Server
	health  *health.Server
	metrics *metrics
	limits  *limits.Streams
	rate    *ratelimit.Limiter // one per server: unary RPCs and streams share a caller's bucket
	tracer  trace.Tracer
	// codemode runs CodeMode's programs and the agent's codemode tool; nil
	// without a registry.
	codemode *codemode.Runtime
	// gate admits large received messages into the memory budget; nil
	// without one.
	gate *recvgate.Gate
	// conns bounds the connections open at once, per peer and in all.
	conns *limits.Conns
	// infra bounds the health and reflection calls open on a connection.
	infra *limits.Infra
	// stopTurns ends the detached agent turns (Stop, or Shutdown past its
	// deadline).
	stopTurns context.CancelFunc
	// handOver, first thing of Stop and Shutdown, hands the durable
	// detached turns over to other replicas (a store that takes turns
	// over): they go on there, not ended here.
	handOver context.CancelFunc
}

type options struct {
	budgets           evaluator.Budgets
	functions         map[string]evaluator.Function
	initialState      *evaluator.State
	cacheSize         int
	maxRunning        int // programs running at once; 0: the evaluator's default
	maxCallsInFlight  int
	maxRecvMsgSize    int
	maxStateBytes     int
	maxStreamsPerConn int
	maxSessions       int
	ratePerSecond     float64
	rateBurst         int
	maxRateBuckets    int
	windowSize        int32
	outboxBytes       int
	slowReaderTimeout time.Duration
	inputTimeout      time.Duration // a tool's request for user input, waiting for the client
	connWindowSize    int32
	trustedProxies    []netip.Prefix
	tokens            *auth.Tokens
	// registryWritesWithoutAuth lets anyone write the registry with auth off.
	registryWritesWithoutAuth bool
	creds                     credentials.TransportCredentials
	keepalive                 keepalive.ServerParameters
	enforcement               keepalive.EnforcementPolicy
	logger                    *slog.Logger
	meterProvider             metric.MeterProvider
	tracerProvider            trace.TracerProvider
	registry                  *utcp.Registry
	store                     toolstore.Store
	memory                    *membudget.Budget
	overload                  *overload.Manager
	models                    *model.Registry
	conn                      connOptions
	newClock                  func() func() time.Time // nil: time.Now
	runLimits                 runLimits               // AgentLoop's and CodeMode's maxima (agentloop_limits.go); zero: the defaults
	turnStore                 turnstore.Store         // AgentLoop's turns (agentloop_durable.go)
	detachedTimeout           time.Duration           // how long a detached turn runs without a client
	maxTakeovers              int                     // how many times one turn may be taken over
	maxTurnsPerCaller         int                     // turns one caller has running on this replica at once
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

// WithMaxRunningPrograms lets at most n ExprTool programs run at once
// over the whole server, the others waiting their turn with their time
// budget not yet counting (0: as many as GOMAXPROCS at the time;
// see evaluator.WithMaxRunning).
func WithMaxRunningPrograms(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return fmt.Errorf("max running programs %d: want 0 (the default) or more", n)
		}
		o.maxRunning = n
		return nil
	}
}

func positive(name string, n int, set func()) error {
	if n < 1 {
		return fmt.Errorf("%s %d: want at least 1", name, n)
	}
	set()
	return nil
}

// WithClock gives each evaluator Tool the server makes (a Session's, a
// Call's, an AgentLoop turn's expr tool) a clock of its own, made by
// newClock, for its time budget to read (default time.Now): a test whose
// budgets must not depend on the machine's load gives each a step clock.
func WithClock(newClock func() func() time.Time) Option {
	return func(o *options) error { o.newClock = newClock; return nil }
}

// toolOptions are the options every evaluator Tool the server makes gets,
// then opts.
func (o *options) toolOptions(opts ...evaluator.ToolOption) []evaluator.ToolOption {
	if o.newClock == nil {
		return opts
	}
	return append([]evaluator.ToolOption{evaluator.WithClock(o.newClock())}, opts...)
}

// WithMaxCallsInFlight bounds the calls running at once on one stream
// (default DefaultMaxCallsInFlight).
func WithMaxCallsInFlight(n int) Option {
	return func(o *options) error {
		return positive("max calls in flight", n, func() { o.maxCallsInFlight = n })
	}
}

// WithMaxRecvMsgSize bounds one received message, in bytes (default
// DefaultMaxRecvMsgSize).
func WithMaxRecvMsgSize(n int) Option {
	return func(o *options) error {
		return positive("max received message size", n, func() { o.maxRecvMsgSize = n })
	}
}

// WithMaxStateBytes bounds a session's state, in bytes of JSON (default
// DefaultMaxStateBytes).
func WithMaxStateBytes(n int) Option {
	return func(o *options) error { return positive("max state bytes", n, func() { o.maxStateBytes = n }) }
}

// WithMaxStreamsPerConn bounds the streams open at once on one connection
// (default DefaultMaxStreamsPerConn).
func WithMaxStreamsPerConn(n int) Option {
	return func(o *options) error {
		return positive("max streams per connection", n, func() { o.maxStreamsPerConn = n })
	}
}

// WithMaxSessions bounds the Session streams the server holds (default
// DefaultMaxSessions).
func WithMaxSessions(n int) Option {
	return func(o *options) error { return positive("max sessions", n, func() { o.maxSessions = n }) }
}

// WithRateLimit admits at most perSecond RPCs per caller, with burst
// (default DefaultRatePerSecond, DefaultRateBurst).
func WithRateLimit(perSecond float64, burst int) Option {
	return func(o *options) error {
		if perSecond <= 0 || burst < 1 {
			return fmt.Errorf("rate limit %v/s burst %d: want both positive", perSecond, burst)
		}
		o.ratePerSecond, o.rateBurst = perSecond, burst
		return nil
	}
}

// WithFlowControlWindows sets the HTTP/2 flow-control windows of a stream
// and of a connection, in bytes (default DefaultInitialWindowSize,
// DefaultInitialConnWindowSize); gRPC takes at least 64 KiB each.
func WithFlowControlWindows(stream, conn int) Option {
	return func(o *options) error {
		const minWindow = 64 << 10
		if stream < minWindow || conn < minWindow || stream > math.MaxInt32 || conn > math.MaxInt32 {
			return fmt.Errorf("flow-control windows %d, %d: want each in [%d, %d]", stream, conn, minWindow, math.MaxInt32)
		}
		o.windowSize, o.connWindowSize = int32(stream), int32(conn)
		return nil
	}
}

// WithSlowReaderTimeout sets how long a Session's outbound queue may stay
// full before its client counts as not reading and the stream ends
// RESOURCE_EXHAUSTED (default DefaultSlowReaderTimeout).
func WithSlowReaderTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("slow-reader timeout %v: want a positive duration", d)
		}
		o.slowReaderTimeout = d
		return nil
	}
}

// WithInputTimeout sets how long a tool's request for user input, relayed
// to a CodeMode.Run or AgentLoop.Run client that opted in, waits for its
// reply within the call's deadline (default userinput.DefaultTimeout).
func WithInputTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("input timeout %v: want a positive duration", d)
		}
		o.inputTimeout = d
		return nil
	}
}

// WithMaxRateBuckets bounds the callers the rate limiter remembers
// (default ratelimit.DefaultMaxBuckets).
func WithMaxRateBuckets(n int) Option {
	return func(o *options) error { return positive("max rate-limit buckets", n, func() { o.maxRateBuckets = n }) }
}

// WithTrustedProxies names the peers (load balancers, ingress proxies)
// whose x-forwarded-for header tells the rate limiter the client's
// address; any other peer's header is ignored (default: none).
func WithTrustedProxies(prefixes ...netip.Prefix) Option {
	return func(o *options) error {
		for _, p := range prefixes {
			if !p.IsValid() {
				return fmt.Errorf("trusted proxy %v: not a valid prefix", p)
			}
			o.trustedProxies = append(o.trustedProxies, p.Masked())
		}
		return nil
	}
}

// WithAuth requires a bearer token from tokens on every service but health
// and reflection (default: no auth).
func WithAuth(tokens auth.Tokens) Option {
	return func(o *options) error { o.tokens = &tokens; return nil }
}

// WithTransportCredentials serves TLS, or mTLS when the credentials ask for
// client certificates (default: plaintext).
func WithTransportCredentials(c credentials.TransportCredentials) Option {
	return func(o *options) error { o.creds = c; return nil }
}

// WithKeepalive sets the keepalive parameters and enforcement policy
// (defaults: the Default* keepalive constants).
func WithKeepalive(p keepalive.ServerParameters, e keepalive.EnforcementPolicy) Option {
	return func(o *options) error { o.keepalive, o.enforcement = p, e; return nil }
}

// WithRegistry lets sessions declare host functions backed by the
// registry's UTCP tools (RUNNER_SERVER with server_name "<manual>.<tool>"),
// and serves exprd.v1.ToolRegistry over it (default: neither).
func WithRegistry(r *utcp.Registry) Option {
	return func(o *options) error { o.registry = r; return nil }
}

// WithMemoryBudget makes the states of sessions, agent turns and calls
// reserve their memory from b: a state the budget cannot hold is refused
// (RESOURCE_EXHAUSTED, QuotaFailure subject memory_budget), a write it
// cannot hold is the call's budget-exceeded (default: no budget). Give the
// same budget to the UTCP registry (utcp.WithMemoryBudget) for tools'
// answers.
func WithMemoryBudget(b *membudget.Budget) Option {
	return func(o *options) error { o.memory = b; return nil }
}

// WithOverload puts the server's RPCs under the overload manager m
// (default: none): while m refuses, new RPCs are refused
// (RESOURCE_EXHAUSTED, OVERLOADED, with a RetryInfo), and those m cancels
// end RESOURCE_EXHAUSTED, OVERLOADED. Health checks and reflection are
// never refused nor tracked. The caller runs m (m.Run); code that holds
// memory for a call counts it with overload.FromContext(ctx).Add.
func WithOverload(m *overload.Manager) Option {
	return func(o *options) error { o.overload = m; return nil }
}

// WithToolStore sets where ToolRegistry's writes go: the registry's own
// memory (toolstore.Local, the default, made when New runs: the manuals the
// registry holds then are the operator's) or a store shared by replicas
// (toolstore.Etcd over the same registry).
func WithToolStore(st toolstore.Store) Option {
	return func(o *options) error { o.store = st; return nil }
}

// WithModels sets the model providers that prompts are planned with, picked
// per request by name (default: none; CodeMode's prompt mode and AgentLoop
// turns are then FailedPrecondition).
func WithModels(m *model.Registry) Option {
	return func(o *options) error { o.models = m; return nil }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.logger = l; return nil }
}

// WithMeterProvider and WithTracerProvider set the telemetry providers
// (default: OpenTelemetry's globals).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) error { o.meterProvider = mp; return nil }
}

// WithTracerProvider: see WithMeterProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error { o.tracerProvider = tp; return nil }
}

// New returns a Server with its services registered.
func New(opts ...Option) (*Server, error) {
	o := options{
		budgets:           evaluator.DefaultBudgets(),
		functions:         map[string]evaluator.Function{},
		cacheSize:         evaluator.DefaultCompileCacheSize,
		maxCallsInFlight:  DefaultMaxCallsInFlight,
		maxRecvMsgSize:    DefaultMaxRecvMsgSize,
		maxStateBytes:     DefaultMaxStateBytes,
		maxStreamsPerConn: DefaultMaxStreamsPerConn,
		maxSessions:       DefaultMaxSessions,
		ratePerSecond:     DefaultRatePerSecond,
		maxRateBuckets:    ratelimit.DefaultMaxBuckets,
		windowSize:        DefaultInitialWindowSize,
		outboxBytes:       DefaultOutboxBytes,
		slowReaderTimeout: DefaultSlowReaderTimeout,
		inputTimeout:      userinput.DefaultTimeout,
		connWindowSize:    DefaultInitialConnWindowSize,
		rateBurst:         DefaultRateBurst,
		conn:              defaultConnOptions(),
		keepalive: keepalive.ServerParameters{
			MaxConnectionAge: DefaultMaxConnectionAge, MaxConnectionAgeGrace: DefaultMaxConnectionAgeGrace,
			Time: DefaultKeepaliveTime, Timeout: DefaultKeepaliveTimeout,
		},
		enforcement:    keepalive.EnforcementPolicy{MinTime: DefaultMinPingInterval, PermitWithoutStream: true},
		logger:         slog.Default(),
		meterProvider:  otel.GetMeterProvider(),
		tracerProvider: otel.GetTracerProvider(),
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.registry != nil && o.store == nil {
		o.store = toolstore.NewLocal(o.registry)
	}
	if o.turnStore == nil {
		mem, err := turnstore.NewMemory(turnstore.MemoryConfig{Limits: turnstore.DefaultLimits(), Budget: o.memory})
		if err != nil {
			return nil, err
		}
		o.turnStore = mem
	}
	if o.maxTurnsPerCaller == 0 {
		o.maxTurnsPerCaller = DefaultMaxTurnsPerCaller
	}
	if o.maxTakeovers == 0 {
		o.maxTakeovers = DefaultMaxTakeovers
	}
	if o.detachedTimeout == 0 {
		o.detachedTimeout = DefaultTurnDetachedTimeout
	}
	if o.initialState == nil {
		o.initialState = evaluator.NewState()
	}
	if size := o.initialState.Size(); size > o.maxStateBytes {
		return nil, fmt.Errorf("initial state: %d bytes, over the max state bytes %d", size, o.maxStateBytes)
	}
	evOpts := []evaluator.Option{evaluator.WithCacheSize(o.cacheSize), evaluator.WithMemoryBudget(o.memory)}
	if o.maxRunning > 0 {
		evOpts = append(evOpts, evaluator.WithMaxRunning(o.maxRunning))
	}
	ev, err := evaluator.New(evOpts...)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: o, eval: ev, health: health.NewServer(), limits: limits.NewStreams(o.maxStreamsPerConn, o.maxSessions),
		rate: ratelimit.New(o.ratePerSecond, o.rateBurst, o.maxRateBuckets, o.trustedProxies), tracer: o.tracerProvider.Tracer("github.com/exprd/exprd/server")}
	s.conns = limits.NewConns(o.conn.maxConnsPerPeer, o.conn.maxConns, s.rate.Trusted, o.logger)
	if s.metrics, err = newMetrics(o.meterProvider, ev, o.store, o.memory, o.overload, s.conns); err != nil {
		return nil, err
	}
	s.infra = limits.NewInfra(MaxInfraPerConn)
	if o.memory != nil {
		s.gate = recvgate.New(o.memory, int(o.windowSize), o.maxRecvMsgSize, s.gateOptions()...)
	}
	gopts := []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(o.tracerProvider), otelgrpc.WithMeterProvider(o.meterProvider))),
		grpc.StatsHandler(encodingStats{}),
		grpc.InTapHandle(s.tapHandle),
		grpc.MaxHeaderListSize(o.conn.maxHeaderListSize),
		grpc.MaxConcurrentStreams(uint32(o.maxStreamsPerConn + o.conn.unaryStreamsPerConn)),
		grpc.ConnectionTimeout(o.conn.connectionTimeout),
		grpc.MaxRecvMsgSize(o.maxRecvMsgSize),
		grpc.InitialWindowSize(o.windowSize),
		grpc.InitialConnWindowSize(o.connWindowSize),
		grpc.KeepaliveParams(o.keepalive),
		grpc.KeepaliveEnforcementPolicy(o.enforcement),
		grpc.ChainUnaryInterceptor(s.unaryInterceptors()...),
		grpc.ChainStreamInterceptor(s.streamInterceptors()...),
	}
	if o.overload != nil { // innermost: the handler works in the context it tracks
		unary, stream := s.overloadInterceptors()
		gopts = append(gopts, grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
	}
	creds := o.creds
	if s.gate != nil {
		gopts = append(gopts, grpc.StatsHandler(s.gate.StatsHandler()))
		if creds != nil {
			creds = s.gate.Credentials(creds)
		}
	}
	if creds != nil {
		gopts = append(gopts, grpc.Creds(creds))
	}
	s.grpc = grpc.NewServer(gopts...)
	reg := registrar{s} // each unary method refuses compressed requests before it reads them
	exprdv1.RegisterExprToolServer(reg, &exprTool{s: s})
	healthpb.RegisterHealthServer(reg, s.health)
	if o.registry != nil {
		rt, err := codemode.New(o.registry, codemode.WithMemoryBudget(o.memory), codemode.WithTurns(ev.Turns()))
		if err != nil {
			return nil, err
		}
		s.codemode = rt
		exprdv1.RegisterCodeModeServer(reg, &codeMode{s: s, rt: rt})
		s.health.SetServingStatus(exprdv1.CodeMode_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
		exprdv1.RegisterToolRegistryServer(reg, newToolRegistry(&o))
		s.health.SetServingStatus(exprdv1.ToolRegistry_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	// AgentLoop is always served, so that a server without model providers
	// answers FAILED_PRECONDITION rather than UNIMPLEMENTED; health calls it
	// serving only when it has providers.
	stopped, stopTurns := context.WithCancel(context.Background())
	s.stopTurns = stopTurns
	handingOver, handOver := context.WithCancel(context.Background())
	s.handOver = handOver
	al := &agentLoop{s: s, rt: s.codemode, stopped: stopped, holder: newHolder(), handingOver: handingOver}
	exprdv1.RegisterAgentLoopServer(reg, al)
	if err := s.metrics.observeTurns(o.meterProvider, al.turns.counts); err != nil {
		return nil, err
	}
	go al.watchTakeovers()
	if o.models != nil {
		s.health.SetServingStatus(exprdv1.AgentLoop_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	reflection.Register(reg)
	s.health.SetServingStatus(exprdv1.ExprTool_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return s, nil
}

// GRPC returns the underlying grpc.Server, to register more services on it
// before Serve; they get the same tap and interceptors, but their unary
// methods take compressed requests (compression.go: only the server's own
// are wrapped to refuse them before they read).
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Serve serves on lis until Shutdown or Stop.
func (s *Server) Serve(lis net.Listener) error {
	lis = s.conns.Listener(lis)
	if s.gate != nil && s.opts.creds == nil {
		lis = s.gate.Listener(lis) // with TLS, the credentials wrap each connection
	}
	err := s.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown turns health to NOT_SERVING, refuses new streams and waits for
// open ones until ctx ends; then it stops them (Unavailable).
func (s *Server) Shutdown(ctx context.Context) {
	s.handOver()
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.stopTurns()
		s.grpc.Stop()
		<-done
	}
	s.stopTurns()
	_ = s.metrics.reg.Unregister()
	if s.metrics.turnsReg != nil {
		_ = s.metrics.turnsReg.Unregister()
	}
}

// Stop stops the server at once.
func (s *Server) Stop() {
	s.handOver()
	s.stopTurns()
	s.grpc.Stop()
	_ = s.metrics.reg.Unregister()
	if s.metrics.turnsReg != nil {
		_ = s.metrics.turnsReg.Unregister()
	}
}

// Evaluator returns the server's evaluator (for its cache counters).
func (s *Server) Evaluator() *evaluator.Evaluator { return s.eval }

// Turns is the turns the server's programs take to compute, ExprTool's
// and CodeMode's: give them to another CodeMode runtime of the process
// (mcpserve.Config.Turns), so that every program shares the cores.
func (s *Server) Turns() codemode.Turns { return s.eval.Turns() }

// TakeHTTP takes a token for an HTTP request (the MCP endpoint's) from
// the bucket its caller's gRPC RPCs draw on: caller, the name its token
// gives, or with none the client's address, as an RPC's (the peer, or
// through a trusted proxy the x-forwarded-for header). It says how long
// until the bucket has a token when it has none.
func (s *Server) TakeHTTP(caller string, r *http.Request) (wait time.Duration, ok bool) {
	key := caller
	if key == "" {
		ap, err := netip.ParseAddrPort(r.RemoteAddr)
		if err != nil {
			return 0, true // not a TCP peer (a test's handler): no address to limit
		}
		key = s.rate.AddrClient(ap.Addr().WithZone("").Unmap(), r.Header.Values("X-Forwarded-For"))
	}
	return s.rate.TakeKey(key)
}
