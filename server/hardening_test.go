package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"golang.org/x/net/http2"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/server/auth"
)

// serve starts s on loopback and returns a connection to it.
func serve(t testing.TB, s *server.Server, dial ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		s.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return conn
}

func newServer(t testing.TB, opts ...server.Option) *server.Server {
	t.Helper()
	s, err := server.New(append([]server.Option{server.WithLogger(quietLog)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// quotaSubject is the subject of err's QuotaFailure, or "".
func quotaSubject(st *status.Status) string {
	for _, d := range st.Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok && len(q.GetViolations()) > 0 {
			return q.GetViolations()[0].GetSubject()
		}
	}
	return ""
}

// registerPanicking registers on s a unary method, /test.Panic/Now (see
// callPanicking), whose handler panics, through s's interceptors.
func registerPanicking(s *server.Server) {
	desc := grpc.ServiceDesc{
		ServiceName: "test.Panic", HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Now", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(healthpb.HealthCheckRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) { panic("secret /etc/passwd detail") }
			return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Panic/Now"}, h)
		}}},
	}
	s.GRPC().RegisterService(&desc, struct{}{})
}

// callPanicking calls registerPanicking's method on conn.
func callPanicking(conn *grpc.ClientConn) error {
	return conn.Invoke(context.Background(), "/test.Panic/Now", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
}

// A panicking handler: the process lives, the client sees Internal with no
// stack, path or panic text, and the panic is counted.
func TestPanickingHandlerIsInternal(t *testing.T) {
	t.Parallel()
	reader := metric.NewManualReader()
	s := newServer(t, server.WithMeterProvider(metric.NewMeterProvider(metric.WithReader(reader))))
	registerPanicking(s)
	conn := serve(t, s)
	err := callPanicking(conn)
	st := status.Convert(err)
	if st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Fatalf("got %v, want Internal \"internal error\"", err)
	}
	if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), ".go") {
		t.Errorf("the error leaks the panic: %v", err)
	}
	// The server goes on serving.
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health after the panic: %v", err)
	}
	if got := counterSum(t, reader, "exprd.panics"); got != 1 {
		t.Errorf("got %d panics counted, want 1", got)
	}
}

func counterSum(t *testing.T, r *metric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if d, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range d.DataPoints {
					sum += p.Value
				}
			}
		}
	}
	return sum
}

func TestAuth(t *testing.T) {
	t.Parallel()
	tokens, err := auth.ParseTokens(strings.NewReader("# name token scopes\nui  tok-exprtool-0123456789 exprtool\nops tok-nothing-0123456789 codemode; root tok-all-000000000000 *"))
	if err != nil {
		t.Fatal(err)
	}
	conn := serve(t, newServer(t, server.WithAuth(tokens)))
	c := exprdv1.NewExprToolClient(conn)
	tests := []struct {
		name  string
		token string
		want  codes.Code
	}{
		{"no token", "", codes.Unauthenticated},
		{"unknown token", "Bearer tok-unknown-0123456789", codes.Unauthenticated},
		{"wrong scheme", "Basic tok-exprtool-0123456789", codes.Unauthenticated},
		{"token without the scope", "Bearer tok-nothing-0123456789", codes.PermissionDenied},
		{"token with the scope", "Bearer tok-exprtool-0123456789", codes.OK},
		{"token with every scope", "Bearer tok-all-000000000000", codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if tt.token != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tt.token)
			}
			_, err := c.Describe(ctx, &exprdv1.DescribeRequest{})
			if got := status.Code(err); got != tt.want {
				t.Errorf("unary: got %v (%v), want %v", got, err, tt.want)
			}
			stream, err := c.Session(ctx)
			if err == nil {
				_ = stream.Send(openMsg(&exprdv1.Open{}))
				_, err = stream.Recv()
			}
			if got := status.Code(err); got != tt.want {
				t.Errorf("stream: got %v (%v), want %v", got, err, tt.want)
			}
		})
	}
	t.Run("health and reflection need no token", func(t *testing.T) {
		t.Parallel()
		if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("health: %v", err)
		}
	})
}

func TestParseTokensErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "a b", "a short exprtool", "a tok-0123456789abcdef x\nb tok-0123456789abcdef y"} {
		if _, err := auth.ParseTokens(strings.NewReader(in)); err == nil {
			t.Errorf("ParseTokens(%q): want an error", in)
		}
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	conn := serve(t, newServer(t, server.WithRateLimit(0.001, 3)))
	c := exprdv1.NewExprToolClient(conn)
	for i := range 4 {
		_, err := c.Describe(context.Background(), &exprdv1.DescribeRequest{})
		if i < 3 && err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
		if i == 3 {
			st := status.Convert(err)
			if st.Code() != codes.ResourceExhausted || quotaSubject(st) != "rate_limit" {
				t.Fatalf("call past the burst: got %v, want ResourceExhausted with a rate_limit QuotaFailure", err)
			}
		}
	}
	// Health is not rate limited.
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("health: %v", err)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	t.Run("max received message size", func(t *testing.T) {
		t.Parallel()
		const limit = 64 << 10
		c := exprdv1.NewExprToolClient(serve(t, newServer(t, server.WithMaxRecvMsgSize(limit))))
		// A CallRequest of exactly limit bytes passes; one byte more is refused.
		pad := func(n int) *exprdv1.CallRequest {
			req := &exprdv1.CallRequest{InputJson: `{"steps": []}`}
			req.StateJson = `{"p": "` + strings.Repeat("x", n) + `"}`
			return req
		}
		base := len(mustMarshal(t, pad(0)))
		n := limit - base
		for len(mustMarshal(t, pad(n))) < limit {
			n++
		}
		for len(mustMarshal(t, pad(n))) > limit {
			n--
		}
		if _, err := c.Call(context.Background(), pad(n)); err != nil {
			t.Errorf("at the limit: %v", err)
		}
		if _, err := c.Call(context.Background(), pad(n+1)); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("one past the limit: got %v, want ResourceExhausted", err)
		}
	})
	t.Run("state bytes per session", func(t *testing.T) {
		t.Parallel()
		c := exprdv1.NewExprToolClient(serve(t, newServer(t, server.WithMaxStateBytes(100))))
		s := openSession(t, c, &exprdv1.Open{Settings: &exprdv1.Settings{Read: true}})
		at := `{"p": "` + strings.Repeat("x", 100-len(`{"p": ""}`)) + `"}`
		s.state(at) // exactly 100 bytes
		s.state(`{"p": "` + strings.Repeat("x", 101-len(`{"p": ""}`)) + `"}`)
		r := s.recv().GetRejected()
		if st := rejectedStatus(r); r == nil || st.Code() != codes.ResourceExhausted || quotaSubject(st) != "max_state_bytes" {
			t.Fatalf("one past the limit: got %v, want Rejected ResourceExhausted with a QuotaFailure of max_state_bytes", r)
		}
		if got := s.read("len(scopes.root.p)"); got != `{"value":91}` {
			t.Errorf("the state at the limit stays: got %s", got)
		}
		// A write that would pass the limit is the model's budget-exceeded.
		s.call("w", `{"steps": [{"set": "scopes.root.q", "expr": "\"more\""}]}`)
		if a := s.answer("w"); a.GetReason() != "budget-exceeded" {
			t.Errorf("a write past the limit: got %s, want budget-exceeded", a.GetAnswerJson())
		}
		s.patch(`{"q": "more"}`)
		if r := s.recv().GetRejected(); r == nil || rejectedStatus(r).Code() != codes.ResourceExhausted {
			t.Errorf("a patch past the limit: got %v, want Rejected ResourceExhausted", r)
		}
		if got := s.read("keys(scopes.root)"); got != `{"value":["p"]}` {
			t.Errorf("state after the refusals: got %s, want only p", got)
		}
	})
	t.Run("calls in flight per stream has a QuotaFailure", func(t *testing.T) {
		t.Parallel()
		c := exprdv1.NewExprToolClient(serve(t, newServer(t, server.WithMaxCallsInFlight(1))))
		s := openSession(t, c, readOpen())
		s.call("a", `{"steps": [{"expr": "ask({})"}]}`)
		_ = s.recv() // the function call
		s.call("b", `{"steps": []}`)
		r := s.recv().GetRejected()
		if st := rejectedStatus(r); r == nil || st.Code() != codes.ResourceExhausted || quotaSubject(st) == "" {
			t.Fatalf("got %v, want Rejected ResourceExhausted with a QuotaFailure", r)
		}
	})
	t.Run("sessions per replica", func(t *testing.T) {
		t.Parallel()
		c := exprdv1.NewExprToolClient(serve(t, newServer(t, server.WithMaxSessions(2))))
		openSession(t, c, &exprdv1.Open{})
		openSession(t, c, &exprdv1.Open{})
		stream, err := c.Session(context.Background())
		if err == nil {
			_ = stream.Send(openMsg(&exprdv1.Open{}))
			_, err = stream.Recv()
		}
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || quotaSubject(st) != "max_sessions" {
			t.Fatalf("one past the limit: got %v, want ResourceExhausted max_sessions", err)
		}
	})
	t.Run("streams per connection", func(t *testing.T) {
		t.Parallel()
		c := exprdv1.NewExprToolClient(serve(t, newServer(t, server.WithMaxStreamsPerConn(2))))
		openSession(t, c, &exprdv1.Open{})
		openSession(t, c, &exprdv1.Open{})
		stream, err := c.Session(context.Background())
		if err == nil {
			_ = stream.Send(openMsg(&exprdv1.Open{}))
			_, err = stream.Recv()
		}
		if st := status.Convert(err); st.Code() != codes.ResourceExhausted || quotaSubject(st) != "max_streams_per_connection" {
			t.Fatalf("one past the limit: got %v, want ResourceExhausted max_streams_per_connection", err)
		}
	})
}

func mustMarshal(t *testing.T, m *exprdv1.CallRequest) []byte {
	b, err := protoMarshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A client that pings more often than the policy allows is sent away with
// GOAWAY ENHANCE_YOUR_CALM "too_many_pings". grpc-go's client will not ping
// more often than every 10 s, so this client speaks HTTP/2 itself.
func TestKeepaliveEnforcement(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := range 10 {
			if fr.WritePing(false, [8]byte{byte(i)}) != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("read: %v; want a GOAWAY", err)
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			if ga.ErrCode != http2.ErrCodeEnhanceYourCalm || string(ga.DebugData()) != "too_many_pings" {
				t.Fatalf("got GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", ga.ErrCode, ga.DebugData())
			}
			return
		}
	}
}
