package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"

	"github.com/exprd/exprd/examples/providers"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// tools is the UTCP registry and the demo providers it may have started.
type tools struct {
	reg     *utcp.Registry
	closers []func()
}

// startTools makes the UTCP registry: its HTTP requests carry the trace
// context and make a span each; manuals load from --manuals-dir; with
// --demo the demo providers start on loopback and register.
func startTools(ctx context.Context, c config, log *slog.Logger) (*tools, error) {
	policy, err := c.egressPolicy()
	if err != nil {
		return nil, fmt.Errorf("egress-allow: %w", err)
	}
	opts := []utcp.Option{
		utcp.WithEgress(policy),
		utcp.WithLogger(log),
		utcp.WithRoundTripper(func(rt http.RoundTripper) http.RoundTripper { return otelhttp.NewTransport(rt) }),
		utcp.WithTimeout(c.utcpTimeout),
		utcp.WithMaxManuals(c.registryMaxManuals),
		utcp.WithMaxTools(c.registryMaxTools),
		utcp.WithMemoryBudget(c.memory),
	}
	// Every tool call is measured at the registry: the span and the
	// exprd.tool.duration histogram (startTelemetry set the providers).
	obs, err := server.ToolCallObserver(otel.GetMeterProvider(), otel.GetTracerProvider())
	if err != nil {
		return nil, err
	}
	opts = append(opts, utcp.WithCallObserver(obs))
	if c.utcpEnvFile != "" {
		opts = append(opts, utcp.WithDotEnvFile(c.utcpEnvFile))
	}
	if c.showProviderMessages || c.demo { // the demo's providers are exprd's own
		opts = append(opts, utcp.WithProviderMessages())
	}
	if c.utcpSecrets != "" {
		opts = append(opts, utcp.WithSecretDir(c.utcpSecrets))
	}
	if keys := splitList(c.utcpEnv); len(keys) > 0 {
		opts = append(opts, utcp.WithEnv(keys...))
	}
	reg, err := utcpall.New(opts...)
	if err != nil {
		return nil, err
	}
	t := &tools{reg: reg}
	if c.manualsDir != "" {
		regs, err := reg.LoadDir(ctx, c.manualsDir)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("manuals-dir: %w", err)
		}
		for _, r := range regs {
			log.Info("manual registered", "manual", r.Manual, "tools", len(r.Tools), "skipped", len(r.Skipped))
			for _, sk := range r.Skipped {
				log.Info("part of a manual left out", "manual", r.Manual, "tool", sk.Name, "registered", sk.Registered, "reason", sk.Reason)
			}
		}
	}
	if c.demo {
		if err := t.startDemo(ctx, log); err != nil {
			t.close()
			return nil, fmt.Errorf("demo providers: %w", err)
		}
	}
	return t, nil
}

// startDemo serves math over HTTP and the catalogue over gRPC on loopback
// and registers their manuals as "math" and "catalog".
func (t *tools) startDemo(ctx context.Context, log *slog.Logger) error {
	m, err := providers.StartMath()
	if err != nil {
		return err
	}
	t.closers = append(t.closers, func() { _ = m.Close() })
	r, err := t.reg.Register(ctx, "math", utcp.FromURL(m.URL()+"/utcp"))
	if err != nil {
		return err
	}
	log.Info("demo provider", "manual", "math", "url", m.URL(), "tools", r.Tools)

	cat, err := providers.StartCatalog()
	if err != nil {
		return err
	}
	t.closers = append(t.closers, cat.Close)
	host, port, _ := net.SplitHostPort(cat.Addr())
	tmpl, _ := json.Marshal(map[string]any{"call_template_type": "grpc", "host": host, "port": port, "service_name": "grpcpb.UTCPService"})
	if r, err = t.reg.Register(ctx, "catalog", utcp.FromTemplate(tmpl)); err != nil {
		return err
	}
	log.Info("demo provider", "manual", "catalog", "addr", cat.Addr(), "tools", r.Tools)
	return nil
}

func (t *tools) close() {
	_ = t.reg.Close()
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
