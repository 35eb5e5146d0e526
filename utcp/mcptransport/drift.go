package mcptransport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// A tool's definition, as fingerprinted: what a model and exprd's checks
// read of it. A server that lists another one later has drifted.
type definition struct {
	Name        string                  `json:"name"`
	Title       string                  `json:"title,omitempty"`
	Description string                  `json:"description,omitempty"`
	Inputs      json.RawMessage         `json:"inputs"`
	Outputs     json.RawMessage         `json:"outputs"`
	Annotations *manual.ToolAnnotations `json:"annotations,omitempty"`
}

// emptyObject is the schema of a tool that gives none.
var emptyObject = json.RawMessage(`{}`)

// listedDefinition is an MCP tool as exprd registers it.
func listedDefinition(t *mcp.Tool) (definition, error) {
	d := definition{Name: t.Name, Title: t.Title, Description: t.Description, Annotations: annotations(t.Annotations),
		Inputs: json.RawMessage(`{"type":"object"}`), Outputs: emptyObject}
	for _, s := range []struct {
		v   any
		dst *json.RawMessage
	}{{t.InputSchema, &d.Inputs}, {t.OutputSchema, &d.Outputs}} {
		if s.v == nil {
			continue
		}
		raw, err := json.Marshal(s.v)
		if err != nil {
			return d, err
		}
		if string(raw) == "null" {
			continue
		}
		if *s.dst, err = canonicalJSON(raw); err != nil {
			return d, err
		}
	}
	if d.Title == "" && d.Annotations != nil {
		d.Title = d.Annotations.Title
	}
	return d, nil
}

// registeredDefinition is a registered tool's definition, for a template
// that carries no fingerprint (a manual written by hand).
func registeredDefinition(t *manual.Tool, name string) definition {
	d := definition{Name: name, Title: t.Title, Description: t.Description, Annotations: t.Annotations, Inputs: emptyObject, Outputs: emptyObject}
	if c, err := canonicalJSON(t.Inputs); err == nil {
		d.Inputs = c
	}
	if c, err := canonicalJSON(t.Outputs); err == nil {
		d.Outputs = c
	}
	return d
}

func annotations(a *mcp.ToolAnnotations) *manual.ToolAnnotations {
	if a == nil {
		return nil
	}
	ro, idem := a.ReadOnlyHint, a.IdempotentHint
	return &manual.ToolAnnotations{Title: a.Title, ReadOnlyHint: &ro, IdempotentHint: &idem,
		DestructiveHint: a.DestructiveHint, OpenWorldHint: a.OpenWorldHint}
}

// fingerprint names a definition: its SHA-256, of its JSON.
func fingerprint(d definition) string {
	raw, _ := json.Marshal(d)
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// setListing keeps what the server lists now and reports every tool
// whose registered definition it no longer lists: logged and counted once
// a change, refused at each call until the manual is replaced.
func (s *server) setListing(tools []*mcp.Tool) {
	l := &listing{tools: tools, fps: make(map[string]string, len(tools)), at: time.Now()}
	for _, t := range tools {
		d, err := listedDefinition(t)
		if err != nil {
			continue
		}
		l.fps[t.Name] = fingerprint(d)
	}
	s.listing.Store(l)
	s.drift.registered.Range(func(k, v any) bool {
		s.check(k.(string), v.(string))
		return true
	})
}

// check is the drift of a tool registered with fingerprint fp: nil while
// the server lists the same definition (or has not been listed yet).
func (s *server) check(name, fp string) *utcp.Drift {
	l := s.listing.Load()
	if l == nil || fp == "" {
		return nil
	}
	listed, ok := l.fps[name]
	if ok && listed == fp {
		s.drift.clear(s, name)
		return nil
	}
	kind := utcp.DriftChanged
	if !ok {
		kind = utcp.DriftRemoved
	}
	return s.drift.note(s, name, &utcp.Drift{Kind: kind, Registered: fp, Listed: listed, Since: l.at})
}

// driftLog is what a server's drift was seen as: each change is logged
// and counted once, when first seen.
type driftLog struct {
	registered sync.Map // a registered tool's name on the server → its fingerprint

	mu    sync.Mutex
	seen  map[string]*utcp.Drift
	count atomic.Int32 // len(seen), read without the lock on every call
}

func (d *driftLog) note(s *server, name string, dr *utcp.Drift) *utcp.Drift {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[string]*utcp.Drift{}
	}
	if old := d.seen[name]; old != nil && old.Listed == dr.Listed && old.Registered == dr.Registered {
		return old
	}
	d.seen[name] = dr
	d.count.Store(int32(len(d.seen)))
	s.env.Logger().Warn("mcp: the server lists another definition of a registered tool than the one registered; its calls are refused until the manual is registered again with replace",
		"manual", s.env.Manual, "mcp_server", s.spec.name, "tool", name, "change", string(dr.Kind), "registered", dr.Registered, "listed", dr.Listed)
	s.pool.metrics.drift.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("manual", s.env.Manual), attribute.String("server", s.spec.name), attribute.String("change", string(dr.Kind))))
	return dr
}

func (d *driftLog) clear(s *server, name string) {
	if d.count.Load() == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.seen[name]; ok {
		delete(d.seen, name)
		d.count.Store(int32(len(d.seen)))
		s.env.Logger().Info("mcp: the server lists the registered definition of a tool again", "manual", s.env.Manual, "mcp_server", s.spec.name, "tool", name)
	}
}

// relistState coalesces the re-lists list_changed notifications ask for:
// one at a time, RelistInterval apart, the last request never lost.
type relistState struct {
	running, again bool
	last           time.Time
}

func (s *server) onListChanged(context.Context, *mcp.ToolListChangedRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.relist.running {
		s.relist.again = true
		return
	}
	s.relist.running = true
	go s.relistLoop()
}

func (s *server) relistLoop() {
	for {
		s.mu.Lock()
		wait := time.Until(s.relist.last.Add(RelistInterval))
		cs := s.cs
		s.mu.Unlock()
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-s.pool.done:
				s.mu.Lock()
				s.relist.running = false
				s.mu.Unlock()
				return
			}
		}
		if cs != nil {
			ctx, cancel := context.WithTimeout(context.Background(), ConnectTimeout)
			tools, err := listTools(ctx, cs, s.spec.name)
			cancel()
			if err != nil {
				s.env.Logger().Warn("mcp: cannot list the server's tools after it said they changed", "manual", s.env.Manual, "mcp_server", s.spec.name, "error", logText(err))
			} else {
				s.setListing(tools)
			}
		}
		s.mu.Lock()
		s.relist.last = time.Now()
		if !s.relist.again || s.closed {
			s.relist.running = false
			s.mu.Unlock()
			return
		}
		s.relist.again = false
		s.mu.Unlock()
	}
}
