package server_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/demo/providers"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/gen/grpcpb"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// toolsServer serves exprd with a UTCP registry holding the demo math
// provider as "math".
func toolsServer(t *testing.T, opts ...server.Option) (exprdv1.ExprToolClient, exprdv1.ToolRegistryClient, *providers.Math) {
	t.Helper()
	m, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	reg, err := utcpall.New(loopbackEgress, utcp.WithRoundTripper(func(rt http.RoundTripper) http.RoundTripper { return otelhttp.NewTransport(rt) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if _, err := reg.Register(context.Background(), "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		t.Fatal(err)
	}
	conn := serve(t, newServer(t, append([]server.Option{server.WithRegistry(reg)}, opts...)...))
	return exprdv1.NewExprToolClient(conn), exprdv1.NewToolRegistryClient(conn), m
}

func utcpFn(name, tool string) *exprdv1.Function {
	return &exprdv1.Function{Name: name, Runner: exprdv1.Function_RUNNER_SERVER, ServerName: tool}
}

func TestUTCPHostFunctions(t *testing.T) {
	t.Parallel()
	c, _, _ := toolsServer(t)
	s := openSession(t, c, &exprdv1.Open{Settings: &exprdv1.Settings{Read: true, Functions: []*exprdv1.Function{
		utcpFn("add", "math.add"), utcpFn("divide", "math.divide"),
	}}})
	tests := []struct {
		name, read, want string
	}{
		{"a call", `add({a: 2, b: 3}).result`, `{"value":5}`},
		{"calls chained", `divide({a: add({a: 4, b: 6}).result, b: 4}).result`, `{"value":2.5}`},
		{"arguments the schema refuses", `add({a: "two", b: 3})`, "invalid-arguments"},
		{"a provider's error", `divide({a: 1, b: 0})`, "host-function"},
	}
	for i, tt := range tests {
		id := string(rune('a' + i))
		s.call(id, `{"read": "`+strings.ReplaceAll(tt.read, `"`, `\"`)+`"}`)
		a := s.answer(id)
		if got := a.GetAnswerJson(); got != tt.want && a.GetReason() != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
	// The schema comes from the tool: Describe shows it.
	d, err := c.Describe(context.Background(), &exprdv1.DescribeRequest{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{utcpFn("add", "math.add")}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.GetFunctionsPrompt(), "Adds two numbers") || !strings.Contains(d.GetFunctionsPrompt(), `"required":["a","b"]`) {
		t.Errorf("functions prompt lacks the tool's description and schema:\n%s", d.GetFunctionsPrompt())
	}
	// A tool the registry lacks is refused at Open.
	stream, _ := c.Session(context.Background())
	_ = stream.Send(openMsg(&exprdv1.Open{Settings: &exprdv1.Settings{Functions: []*exprdv1.Function{utcpFn("pow", "math.pow")}}}))
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an unknown tool: got %v, want InvalidArgument", err)
	}
}

func TestUTCPProviderDown(t *testing.T) {
	t.Parallel()
	c, _, m := toolsServer(t)
	s := openSession(t, c, &exprdv1.Open{Settings: &exprdv1.Settings{Read: true, Functions: []*exprdv1.Function{utcpFn("add", "math.add")}}})
	m.Close()
	s.call("x", `{"read": "add({a: 1, b: 2})"}`)
	a := s.answer("x")
	if a.GetReason() != "host-function" || strings.Contains(a.GetAnswerJson(), "127.0.0.1") {
		t.Errorf("got %s, want host-function without the provider's address", a.GetAnswerJson())
	}
}

// The trace context of a call reaches the tool provider.
func TestTraceContextReachesProvider(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	var mu sync.Mutex
	var traceparent string
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/utcp" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"utcp_version": "1.0.1", "manual_version": "1", "tools": [{"name": "ping", "description": "Pings.",
				"inputs": {"type": "object"}, "tool_call_template": {"call_template_type": "http", "url": "http://` + r.Host + `/ping"}}]}`))
			return
		}
		mu.Lock()
		traceparent = r.Header.Get("traceparent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pong": true}`))
	}))
	defer provider.Close()
	reg, err := utcpall.New(loopbackEgress, utcp.WithRoundTripper(func(rt http.RoundTripper) http.RoundTripper {
		return otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(tp))
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if _, err := reg.Register(context.Background(), "probe", utcp.FromURL(provider.URL+"/utcp")); err != nil {
		t.Fatal(err)
	}
	// And a gRPC provider (go-utcp's UTCPService) that records its metadata.
	gp := &recordingProvider{}
	gs := grpc.NewServer()
	grpcpb.RegisterUTCPServiceServer(gs, gp)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	host, port, _ := net.SplitHostPort(lis.Addr().String())
	tmpl, _ := json.Marshal(map[string]any{"call_template_type": "grpc", "host": host, "port": port, "service_name": "grpcpb.UTCPService"})
	if _, err := reg.Register(context.Background(), "rpc", utcp.FromTemplate(tmpl)); err != nil {
		t.Fatal(err)
	}

	c := exprdv1.NewExprToolClient(serve(t, newServer(t, server.WithRegistry(reg), server.WithTracerProvider(tp))))
	s := openSession(t, c, &exprdv1.Open{Settings: &exprdv1.Settings{Read: true, Functions: []*exprdv1.Function{
		utcpFn("ping", "probe.ping"), utcpFn("rping", "rpc.ping"),
	}}})
	s.call("p", `{"read": "[ping({}).pong, rping({}).pong]"}`)
	if a := s.answer("p"); a.GetAnswerJson() != `{"value":[true,true]}` {
		t.Fatalf("got %s", a.GetAnswerJson())
	}
	mu.Lock()
	defer mu.Unlock()
	for name, tp := range map[string]string{"HTTP": traceparent, "gRPC": gp.traceparent.Load().(string)} {
		if len(tp) != 55 || !strings.HasPrefix(tp, "00-") {
			t.Errorf("the %s provider got traceparent %q, want a W3C trace context", name, tp)
		}
	}
}

type recordingProvider struct {
	grpcpb.UnimplementedUTCPServiceServer
	traceparent atomic.Value
}

func (p *recordingProvider) GetManual(context.Context, *grpcpb.Empty) (*grpcpb.Manual, error) {
	return &grpcpb.Manual{Version: "1", Tools: []*grpcpb.Tool{{Name: "ping", Description: "Pings."}}}, nil
}

func (p *recordingProvider) CallTool(ctx context.Context, _ *grpcpb.ToolCallRequest) (*grpcpb.ToolCallResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	p.traceparent.Store(strings.Join(md.Get("traceparent"), ","))
	return &grpcpb.ToolCallResponse{ResultJson: `{"pong": true}`}, nil
}

func TestToolRegistryService(t *testing.T) {
	t.Parallel()
	_, tr, m := toolsServer(t, server.WithRegistryWritesWithoutAuth())
	ctx := context.Background()
	list, err := tr.ListTools(ctx, &exprdv1.ListToolsRequest{Manual: "math"})
	if err != nil || len(list.GetTools()) != 5 {
		t.Fatalf("ListTools: got %d tools, %v; want 5", len(list.GetTools()), err)
	}
	found, err := tr.SearchTools(ctx, &exprdv1.SearchToolsRequest{Query: "square root of a number", PageSize: 3})
	if err != nil || len(found.GetTools()) == 0 || found.GetTools()[0].GetTool().GetName() != "math.sqrt" {
		t.Fatalf("SearchTools: got %v, %v; want math.sqrt first", found.GetTools(), err)
	}
	if _, err := tr.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: "math", Source: &exprdv1.RegisterManualRequest_Url{Url: m.URL() + "/utcp"}}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("registering math again: got %v, want AlreadyExists", err)
	}
	reg, err := tr.RegisterManual(ctx, &exprdv1.RegisterManualRequest{Name: "math2", Source: &exprdv1.RegisterManualRequest_Url{Url: m.URL() + "/utcp"}})
	if err != nil || len(reg.GetTools()) != 5 || reg.GetTools()[0] != "math2.add" {
		t.Fatalf("RegisterManual: got %v, %v", reg.GetTools(), err)
	}
	bad := []struct {
		name string
		req  *exprdv1.RegisterManualRequest
		want codes.Code
	}{
		{"no name", &exprdv1.RegisterManualRequest{Source: &exprdv1.RegisterManualRequest_Url{Url: m.URL() + "/utcp"}}, codes.InvalidArgument},
		{"no source", &exprdv1.RegisterManualRequest{Name: "x"}, codes.InvalidArgument},
		{"a bad manual", &exprdv1.RegisterManualRequest{Name: "x", Source: &exprdv1.RegisterManualRequest_ManualJson{ManualJson: `{"utcp_version": "1.0.1", "tools": [{"name": 5}]}`}}, codes.InvalidArgument},
		{"not a manual", &exprdv1.RegisterManualRequest{Name: "x", Source: &exprdv1.RegisterManualRequest_Url{Url: m.URL() + "/math/add?a=1&b=2"}}, codes.InvalidArgument},
		{"a bad grpc target", &exprdv1.RegisterManualRequest{Name: "x", Source: &exprdv1.RegisterManualRequest_GrpcTarget{GrpcTarget: "nowhere"}}, codes.InvalidArgument},
	}
	for _, b := range bad {
		if _, err := tr.RegisterManual(ctx, b.req); status.Code(err) != b.want {
			t.Errorf("%s: got %v, want %v", b.name, err, b.want)
		}
	}
	if _, err := tr.SearchTools(ctx, &exprdv1.SearchToolsRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an empty query: got %v, want InvalidArgument", err)
	}
	dereg, err := tr.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "math2"})
	if err != nil || len(dereg.GetTools()) != 5 {
		t.Fatalf("DeregisterManual: got %v, %v", dereg.GetTools(), err)
	}
	if _, err := tr.DeregisterManual(ctx, &exprdv1.DeregisterManualRequest{Name: "math2"}); status.Code(err) != codes.NotFound {
		t.Errorf("deregistering again: got %v, want NotFound", err)
	}
}
