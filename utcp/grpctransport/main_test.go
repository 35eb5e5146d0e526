package grpctransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/gen/grpcpb"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/grpctransport"
	_ "github.com/exprd/exprd/utcp/grpctransport"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// countingListener counts the connections a server accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// server is a gRPC server on loopback, stopped when the test ends.
type server struct {
	*grpc.Server
	lis  *countingListener
	port int
}

func startServer(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) *server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &server{Server: grpc.NewServer(opts...), lis: &countingListener{Listener: l}, port: l.Addr().(*net.TCPAddr).Port}
	register(s.Server)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(s.lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return s
}

// accepted is how many connections the server has accepted.
func (s *server) accepted() int64 { return s.lis.accepted.Load() }

// template is a grpc call template for this server, with extra fields.
func (s *server) template(extra map[string]any) map[string]any {
	t := map[string]any{"call_template_type": "grpc", "host": "127.0.0.1", "port": s.port}
	for k, v := range extra {
		t[k] = v
	}
	return t
}

func newRegistry(t testing.TB, opts ...utcp.Option) *utcp.Registry {
	t.Helper()
	r, err := utcp.New(append([]utcp.Option{utcp.WithEgress(egress.MustParse("loopback")), utcp.WithTransport(grpctransport.Type, grpctransport.New)}, opts...)...)
	if err != nil {
		t.Fatalf("utcp.New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// registerManual registers tools (name → template) with inputs
// {"type": "object"}.
func registerManual(t testing.TB, r *utcp.Registry, name string, tools map[string]map[string]any) {
	t.Helper()
	var list []any
	for n, tmpl := range tools {
		list = append(list, map[string]any{"name": n, "inputs": map[string]any{"type": "object"}, "tool_call_template": tmpl})
	}
	manual := mustJSON(t, map[string]any{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": list})
	if _, err := r.Register(context.Background(), name, utcp.FromText(string(manual)).AllowProtocols("grpc")); err != nil {
		t.Fatalf("Register: %v", err)
	}
}

// provider is a go-utcp UTCPService provider. Its tools:
//
//	add {a, b}        → {"result": a+b}
//	text              → result_json that is not JSON
//	empty             → result_json ""
//	fail              → NotFound, with the server's address in the message
//	slow              → waits for its context to end and reports how it ended
//	meta              → the metadata it received
//	big {n}           → a JSON string of n bytes (not in GetManual)
//	count {n} (stream)→ n chunks {"i": i}
//	broken (stream)   → two chunks, then Internal "boom"
//	hang (stream)     → one chunk, then waits for its context to end
type provider struct {
	grpcpb.UnimplementedUTCPServiceServer
	addr string

	mu        sync.Mutex
	manualMD  metadata.MD
	started   chan struct{} // a slow or hang call began
	ctxEnded  chan error    // how a slow or hang call's context ended
	hadDeadln atomic.Bool
}

func newProvider() *provider {
	return &provider{started: make(chan struct{}, 8), ctxEnded: make(chan error, 8)}
}

func startProvider(t testing.TB) (*server, *provider) {
	t.Helper()
	p := newProvider()
	s := startServer(t, func(s *grpc.Server) { grpcpb.RegisterUTCPServiceServer(s, p) })
	p.addr = "127.0.0.1:" + strconv.Itoa(s.port)
	return s, p
}

func (p *provider) GetManual(ctx context.Context, _ *grpcpb.Empty) (*grpcpb.Manual, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	p.mu.Lock()
	p.manualMD = md
	p.mu.Unlock()
	var tools []*grpcpb.Tool
	for _, n := range []string{"add", "text", "empty", "fail", "slow", "meta", "count", "broken", "hang"} {
		tools = append(tools, &grpcpb.Tool{Name: n, Description: "the " + n + " tool"})
	}
	return &grpcpb.Manual{Version: "1.0", Tools: tools}, nil
}

func (p *provider) CallTool(ctx context.Context, req *grpcpb.ToolCallRequest) (*grpcpb.ToolCallResponse, error) {
	var args map[string]any
	if err := json.Unmarshal([]byte(req.GetArgsJson()), &args); err != nil {
		return nil, status.Error(codes.InvalidArgument, "args_json is not JSON")
	}
	switch req.GetTool() {
	case "add":
		a, _ := args["a"].(float64)
		b, _ := args["b"].(float64)
		return &grpcpb.ToolCallResponse{ResultJson: fmt.Sprintf(`{"result": %g}`, a+b)}, nil
	case "text":
		return &grpcpb.ToolCallResponse{ResultJson: "plain text"}, nil
	case "empty":
		return &grpcpb.ToolCallResponse{}, nil
	case "fail":
		return nil, status.Errorf(codes.NotFound, "no such record on %s", p.addr)
	case "say":
		msg, _ := args["msg"].(string)
		return nil, status.Error(codes.FailedPrecondition, msg)
	case "slow":
		_, ok := ctx.Deadline()
		p.hadDeadln.Store(ok)
		p.started <- struct{}{}
		<-ctx.Done()
		p.ctxEnded <- ctx.Err()
		return nil, ctx.Err()
	case "big":
		n, _ := args["n"].(float64)
		return &grpcpb.ToolCallResponse{ResultJson: `"` + strings.Repeat("x", int(n)) + `"`}, nil
	case "meta":
		md, _ := metadata.FromIncomingContext(ctx)
		out := map[string]any{}
		for _, k := range []string{"authorization", "target", "x-api-key", "cookie"} {
			if v := md.Get(k); len(v) > 0 {
				out[k] = v[0]
			}
		}
		raw, _ := json.Marshal(out)
		return &grpcpb.ToolCallResponse{ResultJson: string(raw)}, nil
	}
	return nil, status.Errorf(codes.NotFound, "no tool %q", req.GetTool())
}

func (p *provider) CallToolStream(req *grpcpb.ToolCallRequest, st grpc.ServerStreamingServer[grpcpb.ToolCallResponse]) error {
	var args map[string]any
	_ = json.Unmarshal([]byte(req.GetArgsJson()), &args)
	switch req.GetTool() {
	case "count":
		n, _ := args["n"].(float64)
		for i := 0; i < int(n); i++ {
			if err := st.Send(&grpcpb.ToolCallResponse{ResultJson: fmt.Sprintf(`{"i": %d}`, i)}); err != nil {
				return err
			}
		}
		return nil
	case "broken":
		for i := 0; i < 2; i++ {
			if err := st.Send(&grpcpb.ToolCallResponse{ResultJson: fmt.Sprintf(`{"i": %d}`, i)}); err != nil {
				return err
			}
		}
		return status.Error(codes.Internal, "boom")
	case "hang":
		if err := st.Send(&grpcpb.ToolCallResponse{ResultJson: `"first"`}); err != nil {
			return err
		}
		p.started <- struct{}{}
		<-st.Context().Done()
		p.ctxEnded <- st.Context().Err()
		return st.Context().Err()
	}
	return status.Errorf(codes.NotFound, "no streaming tool %q", req.GetTool())
}

// transportError asserts err is a *utcp.TransportError.
func transportError(t testing.TB, err error) *utcp.TransportError {
	t.Helper()
	te, ok := err.(*utcp.TransportError)
	if !ok {
		t.Fatalf("got error %T %v, want a *utcp.TransportError", err, err)
	}
	return te
}
