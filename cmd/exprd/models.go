package main

import (
	"fmt"
	"log/slog"

	"github.com/exprd/exprd/model"
	"github.com/exprd/exprd/model/openaicompat"
	"github.com/exprd/exprd/model/scripted"
)

// models is the registry of model providers named in --models-config, and
// the scripted demo model when --demo starts one.
type models struct {
	reg  *model.Registry // the providers, instrumented
	raw  *model.Registry // the providers themselves, closed at the end
	demo *scripted.Server
}

// startModels loads --models-config (API keys only from the environment);
// with --demo it also starts the scripted model server on loopback as the
// provider "demo", the default unless the config names one, so an agent
// turn runs with no API key.
func startModels(c config, log *slog.Logger) (*models, error) {
	cfg := openaicompat.Config{Providers: map[string]openaicompat.ProviderConfig{}}
	if c.modelsConfig != "" {
		var err error
		if cfg, err = openaicompat.LoadConfig(c.modelsConfig); err != nil {
			return nil, fmt.Errorf("models-config: %w", err)
		}
	}
	m := &models{}
	if c.demo {
		if _, taken := cfg.Providers["demo"]; taken {
			return nil, fmt.Errorf("models-config: the provider name \"demo\" is the demo model's")
		}
		demo, err := scripted.Demo()
		if err != nil {
			return nil, err
		}
		m.demo = demo
		cfg.Providers["demo"] = openaicompat.ProviderConfig{BaseURL: demo.BaseURL(), Model: "demo"}
		if cfg.Default == "" {
			cfg.Default = "demo"
		}
	}
	if len(cfg.Providers) == 0 {
		m.reg = model.NewRegistry()
		return m, nil
	}
	raw, err := openaicompat.NewRegistry(cfg)
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
	if m.demo != nil {
		m.demo.Close()
	}
}
