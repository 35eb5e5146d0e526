package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"

	"github.com/exprd/exprd/demo"
	"github.com/exprd/exprd/demo/providers"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
	"github.com/exprd/exprd/server"
	"github.com/exprd/exprd/utcp"
)

// demoMode is everything --demo adds, in one place, so that a newcomer's
// `make run` needs no API key and no provider of their own:
//
//   - the scripted model (model/scripted's Demo) on loopback, as the model
//     provider "demo", the default unless --models-config names one;
//   - the math provider over HTTP, the catalogue over gRPC and the units
//     MCP server (streamable HTTP) on loopback, registered as the manuals
//     "math", "catalog" and "mcp" (its tool mcp.units.convert);
//   - loopback in the egress policy, for those providers only in intent
//     (the policy cannot tell them apart from other loopback providers),
//     and their error messages shown to the model, since they are exprd's
//     own;
//   - sessions starting from the demo products state, with the demo
//     functions.
//
// A nil *demoMode is "no --demo": every method then adds nothing.
type demoMode struct {
	model   *scripted.Server
	math    *providers.Math
	catalog *providers.Catalog
	units   *providers.Units
}

// demoProviderName is the model provider --demo adds.
const demoProviderName = "demo"

// startDemo starts the demo's servers on loopback; nil without --demo.
func startDemo(c config) (*demoMode, error) {
	if !c.demo {
		return nil, nil
	}
	d := &demoMode{}
	var err error
	if d.model, err = scripted.Demo(); err != nil {
		return nil, fmt.Errorf("demo model: %w", err)
	}
	if d.math, err = providers.StartMath(); err != nil {
		d.close()
		return nil, fmt.Errorf("demo math provider: %w", err)
	}
	if d.catalog, err = providers.StartCatalog(); err != nil {
		d.close()
		return nil, fmt.Errorf("demo catalog provider: %w", err)
	}
	if d.units, err = providers.StartUnits(); err != nil {
		d.close()
		return nil, fmt.Errorf("demo units MCP server: %w", err)
	}
	return d, nil
}

// egress is what the demo adds to --egress-allow.
func (d *demoMode) egress() []string {
	if d == nil {
		return nil
	}
	return []string{"loopback"}
}

// utcpOptions is what the demo adds to the registry's options.
func (d *demoMode) utcpOptions() []utcp.Option {
	if d == nil {
		return nil
	}
	return []utcp.Option{utcp.WithProviderMessages()}
}

// addModel adds the scripted model to cfg as the provider "demo", the
// default unless cfg names one.
func (d *demoMode) addModel(cfg *openaicompat.Config) error {
	if d == nil {
		return nil
	}
	if _, taken := cfg.Providers[demoProviderName]; taken {
		return fmt.Errorf("models-config: the provider name %q is the demo model's", demoProviderName)
	}
	cfg.Providers[demoProviderName] = openaicompat.ProviderConfig{BaseURL: d.model.BaseURL(), Model: "demo"}
	if cfg.Default == "" {
		cfg.Default = demoProviderName
	}
	return nil
}

// register registers the demo providers' manuals as "math", "catalog"
// and "mcp".
func (d *demoMode) register(ctx context.Context, reg *utcp.Registry, log *slog.Logger) error {
	if d == nil {
		return nil
	}
	r, err := reg.Register(ctx, "math", utcp.FromURL(d.math.URL()+"/utcp"))
	if err != nil {
		return fmt.Errorf("demo math provider: %w", err)
	}
	log.Info("demo provider", "manual", "math", "url", d.math.URL(), "tools", r.Tools)
	host, port, _ := net.SplitHostPort(d.catalog.Addr())
	tmpl, _ := json.Marshal(map[string]any{"call_template_type": "grpc", "host": host, "port": port, "service_name": "grpcpb.UTCPService"})
	if r, err = reg.Register(ctx, "catalog", utcp.FromTemplate(tmpl)); err != nil {
		return fmt.Errorf("demo catalog provider: %w", err)
	}
	log.Info("demo provider", "manual", "catalog", "addr", d.catalog.Addr(), "tools", r.Tools)
	tmpl, _ = json.Marshal(map[string]any{"call_template_type": "mcp", "config": map[string]any{"mcpServers": map[string]any{
		"units": map[string]any{"transport": "http", "url": d.units.URL()}}}})
	if r, err = reg.Register(ctx, "mcp", utcp.FromTemplate(tmpl)); err != nil {
		return fmt.Errorf("demo units MCP server: %w", err)
	}
	log.Info("demo provider", "manual", "mcp", "url", d.units.URL(), "tools", r.Tools)
	return nil
}

// serverOptions is the demo products state and functions.
func (d *demoMode) serverOptions(log *slog.Logger) []server.Option {
	if d == nil {
		return nil
	}
	return []server.Option{server.WithInitialState(demo.Products), server.WithFunctions(demo.Functions(log)...)}
}

// close stops the demo's servers.
func (d *demoMode) close() {
	if d == nil {
		return
	}
	if d.units != nil {
		_ = d.units.Close()
	}
	if d.catalog != nil {
		d.catalog.Close()
	}
	if d.math != nil {
		_ = d.math.Close()
	}
	if d.model != nil {
		d.model.Close()
	}
}
