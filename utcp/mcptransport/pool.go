package mcptransport

import (
	"fmt"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/exprd/exprd/utcp"
)

// poolKey names the registry's pool of MCP sessions in utcp.Env.Shared.
const poolKey = "mcptransport.pool"

// pool is a registry's MCP servers: one server (one session) per manual
// and server configuration, closed with the registry (utcp.Env.Shared).
type pool struct {
	mu      sync.Mutex
	servers map[string]*server
	stdio   int // stdio servers running
	closed  bool
	done    chan struct{}

	metrics poolMetrics
}

type poolMetrics struct {
	drift   metric.Int64Counter // drift detections
	refused metric.Int64Counter // calls refused for drift
}

func poolOf(env utcp.Env) (*pool, error) {
	if env.Shared == nil {
		return nil, fmt.Errorf("mcptransport: the Env has no Shared pool (build transports through a utcp.Registry)")
	}
	c, err := env.Shared.Get(poolKey, func() (io.Closer, error) { return newPool() })
	if err != nil {
		return nil, err
	}
	return c.(*pool), nil
}

func newPool() (*pool, error) {
	p := &pool{servers: map[string]*server{}, done: make(chan struct{})}
	m := otel.GetMeterProvider().Meter("github.com/exprd/exprd/utcp/mcptransport")
	var err error
	if p.metrics.drift, err = m.Int64Counter("exprd.mcp.tool.drift", metric.WithDescription(
		"Registered MCP tools whose server lists another definition (or none), by manual, server and change, counted once a change.")); err != nil {
		return nil, err
	}
	if p.metrics.refused, err = m.Int64Counter("exprd.mcp.drift.refused", metric.WithDescription(
		"Calls of MCP tools refused because their server's definition drifted, by manual and server.")); err != nil {
		return nil, err
	}
	go p.janitor()
	return p, nil
}

// server is the pool's server for spec, made (without I/O) on first use.
func (p *pool) server(spec *serverSpec, env utcp.Env) *server {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.servers[spec.key]
	if s == nil {
		s = newServer(p, spec, env)
		if p.closed {
			s.closed = true
		}
		p.servers[spec.key] = s
	}
	return s
}

func (p *pool) takeStdio() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdio >= MaxStdioServers {
		return (&utcp.TransportError{Reason: utcp.ReasonUnreachable, Body: fmt.Sprintf(
			"exprd runs at most %d stdio MCP servers at once", MaxStdioServers)}).WithCause(errStdioLimit)
	}
	p.stdio++
	return nil
}

func (p *pool) releaseStdio() {
	p.mu.Lock()
	p.stdio--
	p.mu.Unlock()
}

// janitor closes sessions idle for IdleTimeout (their processes stop).
func (p *pool) janitor() {
	t := time.NewTicker(IdleTimeout / 4)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		p.mu.Lock()
		var idle []*server
		for _, s := range p.servers {
			if time.Since(time.Unix(0, s.lastUsed.Load())) > IdleTimeout {
				idle = append(idle, s)
			}
		}
		p.mu.Unlock()
		for _, s := range idle {
			s.mu.Lock()
			busy := len(s.calls) > 0
			s.mu.Unlock()
			if !busy {
				s.drop(false, &utcp.TransportError{Reason: utcp.ReasonBroken, Body: "the session was idle"})
			}
		}
	}
}

// Close closes every session and stops every stdio server, waiting for
// them.
func (p *pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	servers := make([]*server, 0, len(p.servers))
	for _, s := range p.servers {
		servers = append(servers, s)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.close()
			s.waitDialing()
		}()
	}
	wg.Wait()
	return nil
}
