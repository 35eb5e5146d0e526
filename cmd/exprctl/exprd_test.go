package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"testing"

	"github.com/exprd/exprd/demo"
	"github.com/exprd/exprd/demo/providers"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// serve serves srv on a loopback port until the test ends.
func serve(t *testing.T, srv *server.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// startTools serves exprd as `exprd --demo` does, with its tool providers:
// math (HTTP: math.add, math.multiply, ...) and catalog (gRPC:
// catalog.restock streams), registered as the operator's, and the egress
// policy allowing loopback. More options come last.
func startTools(t *testing.T, more ...server.Option) string {
	t.Helper()
	m, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	cat, err := providers.StartCatalog()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cat.Close)
	reg, err := utcpall.New(utcp.WithEgress(egress.MustParse("loopback")), utcp.WithProviderMessages(), utcp.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	ctx := context.Background()
	if _, err := reg.Register(ctx, "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(cat.Addr())
	tmpl, _ := json.Marshal(map[string]any{"call_template_type": "grpc", "host": host, "port": port, "service_name": "grpcpb.UTCPService"})
	if _, err := reg.Register(ctx, "catalog", utcp.FromTemplate(tmpl)); err != nil {
		t.Fatal(err)
	}
	opts := []server.Option{
		server.WithLogger(slog.New(slog.DiscardHandler)), server.WithInitialState(demo.Products),
		server.WithFunctions(demo.Functions(slog.New(slog.DiscardHandler))...), server.WithRegistry(reg),
	}
	srv, err := server.New(append(opts, more...)...)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, srv)
}

// withModels serves the model providers named, each replaying its script
// on loopback.
func withModels(t *testing.T, scripts map[string]scripted.Script) server.Option {
	t.Helper()
	models := model.NewRegistry()
	for name, script := range scripts {
		s, err := scripted.Start(script)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		p, err := openaicompat.New(name, openaicompat.ProviderConfig{BaseURL: s.BaseURL(), Model: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		if err := models.Register(name, p); err != nil {
			t.Fatal(err)
		}
	}
	return server.WithModels(models)
}
