package grpctransport_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	greflection "google.golang.org/grpc/reflection"
	rv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/manual"
)

// healthServer serves grpc.health.v1.Health (Check is unary, Watch
// server-streaming) with reflection as register sets it up, and counts the
// reflection streams it is asked.
type healthServer struct {
	*server
	health      *health.Server
	reflections atomic.Int64
}

func startHealth(t *testing.T, reflection func(*grpc.Server)) *healthServer {
	t.Helper()
	h := &healthServer{health: health.NewServer()}
	count := grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if strings.Contains(info.FullMethod, "ServerReflection") {
			h.reflections.Add(1)
		}
		return handler(srv, ss)
	})
	h.server = startServer(t, func(s *grpc.Server) {
		healthpb.RegisterHealthServer(s, h.health)
		if reflection != nil {
			reflection(s)
		}
	}, count)
	t.Cleanup(h.health.Shutdown)
	return h
}

func withReflection(s *grpc.Server) { greflection.Register(s) }

// withV1AlphaOnly offers only the older reflection service.
func withV1AlphaOnly(s *grpc.Server) {
	rv1alpha.RegisterServerReflectionServer(s, greflection.NewServer(greflection.ServerOptions{Services: s}))
}

func (h *healthServer) tools() map[string]map[string]any {
	tool := func(method string) map[string]any {
		return h.template(map[string]any{"service_name": "grpc.health.v1.Health", "method_name": method})
	}
	return map[string]map[string]any{
		"check": tool("Check"),
		"watch": tool("Watch"),
		"nope":  tool("Nope"),
		"other": h.template(map[string]any{"service_name": "grpc.health.v1.Nothing", "method_name": "Check"}),
	}
}

func TestReflectionCall(t *testing.T) {
	t.Parallel()
	for name, refl := range map[string]func(*grpc.Server){"v1": withReflection, "v1alpha": withV1AlphaOnly} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := startHealth(t, refl)
			r := newRegistry(t)
			registerManual(t, r, "health", h.tools())
			for _, args := range []map[string]any{{"service": ""}, nil} {
				got, err := r.Call(context.Background(), "health.check", args)
				if err != nil {
					t.Fatalf("Call(%v): %v", args, err)
				}
				if want := map[string]any{"status": "SERVING"}; !reflect.DeepEqual(got, want) {
					t.Errorf("Call(%v): got %v, want %v", args, got, want)
				}
			}
		})
	}
}

func TestReflectionStream(t *testing.T) {
	t.Parallel()
	h := startHealth(t, withReflection)
	h.health.SetServingStatus("db", healthpb.HealthCheckResponse_SERVING)
	r := newRegistry(t)
	registerManual(t, r, "health", h.tools())

	st, err := r.CallStream(context.Background(), "health.watch", map[string]any{"service": "db"})
	if err != nil {
		t.Fatalf("CallStream: %v", err)
	}
	defer st.Close()
	if v, err := st.Next(); err != nil || !reflect.DeepEqual(v, map[string]any{"status": "SERVING"}) {
		t.Fatalf("first chunk: got %v, %v; want map[status:SERVING]", v, err)
	}
	h.health.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	if v, err := st.Next(); err != nil || !reflect.DeepEqual(v, map[string]any{"status": "NOT_SERVING"}) {
		t.Fatalf("second chunk: got %v, %v; want map[status:NOT_SERVING]", v, err)
	}

	// A unary method streamed is one chunk.
	st2, err := r.CallStream(context.Background(), "health.check", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := utcptest.Drain(t, st2)
	if err != nil || !reflect.DeepEqual(got, []any{map[string]any{"status": "SERVING"}}) {
		t.Errorf("got %v, %v; want [map[status:SERVING]]", got, err)
	}
}

// Descriptors are asked once per provider and service, whatever the tools
// and calls, over the one connection.
func TestReflectionCached(t *testing.T) {
	t.Parallel()
	h := startHealth(t, withReflection)
	r := newRegistry(t)
	registerManual(t, r, "health", h.tools())
	registerManual(t, r, "again", h.tools())
	for i := 0; i < 3; i++ {
		for _, tool := range []string{"health.check", "again.check"} {
			if _, err := r.Call(context.Background(), tool, nil); err != nil {
				t.Fatal(err)
			}
		}
		st, err := r.CallStream(context.Background(), "health.watch", nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Next(); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}
	if got := h.reflections.Load(); got != 1 {
		t.Errorf("reflection was asked %d times, want 1", got)
	}
	if got := h.accepted(); got != 1 {
		t.Errorf("the provider accepted %d connections, want 1", got)
	}
}

func TestReflectionErrors(t *testing.T) {
	t.Parallel()
	h := startHealth(t, withReflection)
	r := newRegistry(t)
	registerManual(t, r, "health", h.tools())

	invalid := []struct {
		name string
		args map[string]any
		want []string // in the problem
	}{
		{"unknown field", map[string]any{"servce": ""}, []string{`unknown field "servce"`, "grpc.health.v1.HealthCheckRequest has service"}},
		{"wrong type", map[string]any{"service": 5}, []string{"grpc.health.v1.HealthCheckRequest"}},
	}
	for _, c := range invalid {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.Call(context.Background(), "health.check", c.args)
			var ia *manual.InvalidArgumentsError
			if !errors.As(err, &ia) {
				t.Fatalf("got %v, want a *manual.InvalidArgumentsError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}

	notFound := []struct {
		name, tool string
		want       string
	}{
		{"unknown method", "health.nope", "grpc.health.v1.Health has no method Nope (it has: Check, List, Watch)"},
		{"unknown service", "health.other", "grpc.health.v1.Nothing"},
	}
	for _, c := range notFound {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.Call(context.Background(), c.tool, nil)
			te := transportError(t, err)
			body, _ := te.Body.(map[string]any)
			if te.Reason != utcp.ReasonStatus || te.Status != 404 || body["code"] != "NotFound" {
				t.Errorf("got %s %d %v, want status 404 NotFound", te.Reason, te.Status, te.Body)
			}
			if msg, _ := body["message"].(string); !strings.Contains(msg, c.want) {
				t.Errorf("message %q does not say %q", msg, c.want)
			}
		})
	}

	t.Run("provider status", func(t *testing.T) {
		_, err := r.Call(context.Background(), "health.check", map[string]any{"service": "unknown"})
		if te := transportError(t, err); te.Status != 404 {
			t.Errorf("got %d %v, want 404", te.Status, te.Body)
		}
	})
}

func TestNoReflection(t *testing.T) {
	t.Parallel()
	h := startHealth(t, nil)
	r := newRegistry(t)
	registerManual(t, r, "health", h.tools())
	_, err := r.Call(context.Background(), "health.check", nil)
	te := transportError(t, err)
	if te.Status != 501 || !strings.Contains(err.Error(), "server reflection") {
		t.Errorf("got %d %v, want 501 saying there is no server reflection", te.Status, err)
	}
}
