package main

import (
	"fmt"
	"log/slog"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
)

// models is the registry of model providers named in --models-config, and
// the demo's.
type models struct {
	reg *model.Registry // the providers, instrumented
	raw *model.Registry // the providers themselves, closed at the end
}

// startModels loads --models-config (API keys only from the environment)
// and adds the demo's model (demo.addModel).
func startModels(c config, dm *demoMode, log *slog.Logger) (*models, error) {
	cfg := openaicompat.Config{Providers: map[string]openaicompat.ProviderConfig{}}
	if c.modelsConfig != "" {
		var err error
		if cfg, err = openaicompat.LoadConfig(c.modelsConfig); err != nil {
			return nil, fmt.Errorf("models-config: %w", err)
		}
	}
	if err := dm.addModel(&cfg); err != nil {
		return nil, err
	}
	m := &models{}
	if len(cfg.Providers) == 0 {
		m.reg = model.NewRegistry()
		return m, nil
	}
	opts := []openaicompat.Option{openaicompat.WithMemoryBudget(c.memory), openaicompat.WithMaxConns(c.modelMaxConns)}
	if c.modelIdleConns > 0 { // validate refuses 0 from the flags; a config built otherwise keeps the default
		opts = append(opts, openaicompat.WithIdleConns(c.modelIdleConns))
	}
	raw, err := openaicompat.NewRegistry(cfg, opts...)
	if err != nil {
		m.close()
		return nil, err
	}
	m.raw, m.reg = raw, model.NewRegistry()
	// Each turn a span, its latency and tokens metrics.
	for _, name := range raw.Names() {
		p, _ := raw.Get(name)
		if err := m.reg.Register(name, model.Instrument(name, p)); err != nil {
			m.close()
			return nil, err
		}
	}
	if err := m.reg.SetDefault(raw.Default()); err != nil {
		m.close()
		return nil, err
	}
	log.Info("model providers", "names", m.reg.Names(), "default", m.reg.Default())
	return m, nil
}

func (m *models) close() {
	if m.raw != nil {
		_ = m.raw.Close()
	}
}
