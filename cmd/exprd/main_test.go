package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/exprdproc"
)

// startExprd builds and starts a real exprd process (EXPRD_BIN when make
// test built one) and returns it.
func startExprd(t *testing.T, args ...string) *exprdproc.Proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := exprdproc.Build(ctx, "../..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := exprdproc.Start(bin, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func TestDemoAndDrainOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	p := startExprd(t, "--demo", "--drain-timeout", "500ms")
	addr, metricsAddr := p.Addr, p.Metrics
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	health := healthpb.NewHealthClient(conn)
	if r, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: got %v %v, want SERVING", r, err)
	}

	// A session on the demo state, with a call waiting for a confirm.
	stream, err := exprdv1.NewExprToolClient(conn).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *exprdv1.SessionRequest) {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Open{Open: &exprdv1.Open{Settings: &exprdv1.Settings{
		Read: true,
		Functions: []*exprdv1.Function{
			{Name: "convertPrice", Runner: exprdv1.Function_RUNNER_SERVER},
			{Name: "add", Runner: exprdv1.Function_RUNNER_SERVER, ServerName: "math.add"},
			{Name: "product", Runner: exprdv1.Function_RUNNER_SERVER, ServerName: "catalog.get"},
		},
	}}}})
	if m, err := stream.Recv(); err != nil || m.GetOpened() == nil {
		t.Fatalf("got %v %v, want Opened", m, err)
	}
	send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "a",
		InputJson: `{"read": "convertPrice({amount: sortBy(scopes.root.products.items, .price)[0].price, to: \"USD\"})"}`}}})
	if m, err := stream.Recv(); err != nil || m.GetAnswer().GetAnswerJson() != `{"value":9.55}` {
		t.Fatalf("got %v %v, want the cheapest price in USD", m, err)
	}
	// The demo's UTCP providers: math over HTTP, the catalogue over gRPC.
	send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "t",
		InputJson: `{"read": "{sum: add({a: 2, b: 3}).result, name: product({id: \"p03\"}).name}"}`}}})
	if m, err := stream.Recv(); err != nil || m.GetAnswer().GetAnswerJson() != `{"value":{"name":"Pen set","sum":5}}` {
		t.Fatalf("got %v %v, want the demo tools' answers", m, err)
	}
	send(&exprdv1.SessionRequest{Msg: &exprdv1.SessionRequest_Call{Call: &exprdv1.Call{CallId: "b",
		InputJson: `{"steps": [{"confirm": "go?", "set": "scopes.root.x", "expr": "1"}]}`}}})
	if m, err := stream.Recv(); err != nil || m.GetConfirmRequest() == nil {
		t.Fatalf("got %v %v, want ConfirmRequest", m, err)
	}

	// /metrics serves the counters of what just happened.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`exprd_calls_total{`, `outcome="ok"`, `exprd_sessions_open`, `exprd_compile_cache_misses_total`, `exprd_evaluation_duration_seconds_bucket`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	watch, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch: got %v %v, want SERVING", r, err)
	}

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Health turns NOT_SERVING at once, and new streams are refused.
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health watch after SIGTERM: got %v %v, want NOT_SERVING", r, err)
	}
	if s2, err := exprdv1.NewExprToolClient(conn).Session(ctx); err == nil {
		if _, err := s2.Recv(); status.Code(err) != codes.Unavailable {
			t.Errorf("a new stream while draining: got %v, want Unavailable", err)
		}
	}
	// The open stream is ended once the drain window is over.
	for {
		_, err := stream.Recv()
		if err != nil {
			if c := status.Code(err); c != codes.Unavailable && c != codes.Canceled {
				t.Errorf("the open stream ended with %v, want Unavailable", err)
			}
			break
		}
	}
	if err := p.Wait(10 * time.Second); err != nil {
		t.Errorf("after its drain window: %v, want exit 0", err)
	}
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "exprd.yaml")
	if err := os.WriteFile(file, []byte("max-iterations: 300\nmax-steps: 7\nlisten: \":5000\"\nmax-timeout: 50ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("EXPRD_MAX_ITERATIONS", "500")
	t.Setenv("EXPRD_LISTEN", ":6000")
	c, err := parseConfig([]string{"--config", file, "--listen", ":7000"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.listen != ":7000" || c.budgets.MaxIterations != 500 || c.budgets.MaxSteps != 7 || c.budgets.Timeout != 50*time.Millisecond {
		t.Errorf("got listen %q iterations %d steps %d timeout %v; want the flag's :7000, the environment's 500, the file's 7 and 50ms",
			c.listen, c.budgets.MaxIterations, c.budgets.MaxSteps, c.budgets.Timeout)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown key in the file", []string{"--config", write("a.yaml", "max-iteration: 5\n")}, nil, `"max-iteration" is not a setting`},
		{"bad value in the file", []string{"--config", write("b.yaml", "max-steps: many\n")}, nil, "max-steps"},
		{"not a mapping", []string{"--config", write("c.yaml", "- 1\n")}, nil, "c.yaml"},
		{"nested value", []string{"--config", write("d.yaml", "max-steps: [1]\n")}, nil, "max-steps: want a single value"},
		{"a key twice", []string{"--config", write("e.yaml", "max-steps: 5\nmax-steps: 6\n")}, nil, `mapping key "max-steps" already defined`},
		{"two documents", []string{"--config", write("f.yaml", "max-steps: 5\n---\nmax-nodes: 6\n")}, nil, "f.yaml: more than one YAML document"},
		{"bad environment value", nil, map[string]string{"EXPRD_MAX_NODES": "x"}, "EXPRD_MAX_NODES"},
		{"zero budget", []string{"--max-steps", "0"}, nil, "max-steps"},
		{"tls half given", []string{"--tls-cert", "c.pem"}, nil, "tls-cert and tls-key"},
		{"missing file", []string{"--config", filepath.Join(dir, "none.yaml")}, nil, "none.yaml"},
		{"stray argument", []string{"serve"}, nil, `unexpected argument "serve"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := parseConfig(tt.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

func TestModelsConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "providers:\n  local:\n    base_url: http://127.0.0.1:11434/v1\n    model: qwen3:8b\n")
	dm, err := startDemo(config{demo: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dm.close()
	m, err := startModels(config{modelsConfig: good}, dm, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.reg.Names(), ","); got != "demo,local" || m.reg.Default() != "demo" {
		t.Errorf("got providers %q default %q, want demo,local with demo the default", got, m.reg.Default())
	}
	m.close()
	for _, tt := range []struct{ name, text, want string }{
		{"a key in the file", "providers:\n  x:\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    api_key: sk-secret\n", "api_key"},
		{"no model", "providers:\n  x:\n    base_url: http://127.0.0.1:1/v1\n", "model"},
		{"an unknown key", "providers:\n  x:\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    temperature: 1\n", "temperature"},
	} {
		if _, err := startModels(config{modelsConfig: write(tt.name+".yaml", tt.text)}, nil, quiet); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error naming %q", tt.name, err, tt.want)
		}
	}
}

var quiet = slog.New(slog.DiscardHandler)
