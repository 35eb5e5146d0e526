package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"

	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// tools is the UTCP registry.
type tools struct {
	reg *utcp.Registry
}

// startTools makes the UTCP registry: its HTTP requests carry the trace
// context and make a span each; manuals load from --manuals-dir; with
// --demo the demo's providers register.
func startTools(ctx context.Context, c config, dm *demoMode, log *slog.Logger) (*tools, error) {
	policy, err := c.egressPolicy(dm.egress()...)
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
	if c.showProviderMessages {
		opts = append(opts, utcp.WithProviderMessages())
	}
	opts = append(opts, dm.utcpOptions()...)
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
	if err := dm.register(ctx, reg, log); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *tools) close() { _ = t.reg.Close() }

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
