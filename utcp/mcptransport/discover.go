package mcptransport

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// Discover implements utcp.Discoverer: it connects to each of the
// template's servers (or reuses its session), reads every page of its
// tools/list anew, and returns the manual of their tools, named
// `<server>.<tool>`. Each tool's template is the registered template's
// one server as written (its variables unresolved), the tool's name on
// the server, and the fingerprint of its definition; a server's `timeout`
// (seconds) becomes the tools' `timeout`.
func (t *transport) Discover(ctx context.Context) (*utcp.Document, error) {
	written, err := t.writtenServers(ctx)
	if err != nil {
		return nil, err
	}
	type tool struct {
		Name        string                  `json:"name"`
		Title       string                  `json:"title,omitempty"`
		Description string                  `json:"description"`
		Inputs      json.RawMessage         `json:"inputs"`
		Outputs     json.RawMessage         `json:"outputs"`
		Annotations *manual.ToolAnnotations `json:"annotations,omitempty"`
		Tags        []string                `json:"tags"`
		Template    map[string]any          `json:"tool_call_template"`
	}
	var tools []tool
	for _, name := range t.tmpl.names {
		spec := t.tmpl.servers[name]
		srv := t.pool.server(spec, t.env)
		listed, err := srv.listNow(ctx)
		if err != nil {
			return nil, discoverError(t.env.Manual, name, err)
		}
		for _, mt := range listed {
			d, err := listedDefinition(mt)
			if err != nil {
				return nil, &manual.Error{Manual: t.env.Manual, Msg: fmt.Sprintf("MCP server %q, tool %q: its schemas do not encode as JSON", name, mt.Name)}
			}
			tmpl := map[string]any{"call_template_type": Type, "config": map[string]any{"mcpServers": map[string]any{name: written.servers[name]}},
				"tool_name": mt.Name, "fingerprint": fingerprint(d)}
			if written.auth != nil {
				tmpl["auth"] = written.auth
			}
			if spec.timeout > 0 {
				tmpl["timeout"] = spec.timeout.Milliseconds()
			} else if written.timeout != nil {
				tmpl["timeout"] = written.timeout
			}
			// Named in full: a server named as its manual keeps its part.
			tl := tool{Name: t.env.Manual + "." + name + "." + mt.Name, Title: d.Title, Description: d.Description, Inputs: d.Inputs, Outputs: d.Outputs,
				Annotations: d.Annotations, Tags: []string{}, Template: tmpl}
			if err := checkTool(tl); err != nil {
				return nil, &manual.Error{Manual: t.env.Manual, Msg: fmt.Sprintf("MCP server %q, tool %q: %s", name, mt.Name, err)}
			}
			tools = append(tools, tl)
		}
	}
	body, err := json.Marshal(map[string]any{"utcp_version": "1.0.1", "manual_version": "1.0.0", "tools": tools})
	if err != nil {
		return nil, &manual.Error{Manual: t.env.Manual, Msg: err.Error()}
	}
	return &utcp.Document{Body: body, ContentType: "application/json"}, nil
}

// checkTool reads one discovered tool as a manual's (its schemas compiled
// as every tool's are), so that a refusal names the server and the tool.
func checkTool(tl any) error {
	raw, err := json.Marshal(map[string]any{"utcp_version": "1.0.1", "tools": []any{tl}})
	if err != nil {
		return err
	}
	if _, err := manual.Parse(raw); err != nil {
		if me, ok := err.(*manual.Error); ok {
			return fmt.Errorf("%s", (&manual.Error{Path: trimToolPath(me.Path), Msg: me.Msg}).Error())
		}
		return err
	}
	return nil
}

// trimToolPath drops the `tools[0].` of a path in a one-tool manual.
func trimToolPath(p string) string {
	const pre = "tools[0]."
	if len(p) >= len(pre) && p[:len(pre)] == pre {
		return p[len(pre):]
	}
	return p
}

// written is the registered template as written: its servers' entries,
// auth and timeout, variables unresolved.
type written struct {
	servers map[string]json.RawMessage
	auth    json.RawMessage
	timeout json.RawMessage
}

func (t *transport) writtenServers(ctx context.Context) (*written, error) {
	raw, ok := utcp.DiscoveryTemplate(ctx)
	if !ok {
		return nil, &manual.Error{Manual: t.env.Manual, Msg: "an mcp template discovers only as it is registered"}
	}
	var w struct {
		Config struct {
			Servers map[string]json.RawMessage `json:"mcpServers"`
		} `json:"config"`
		Auth    json.RawMessage `json:"auth"`
		Timeout json.RawMessage `json:"timeout"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, &manual.Error{Manual: t.env.Manual, Msg: err.Error()}
	}
	return &written{servers: w.Config.Servers, auth: w.Auth, timeout: w.Timeout}, nil
}

// listNow is what the server lists now: its session's listing when the
// session was just made, else a new one (a registration with replace
// adopts what the server lists now).
func (s *server) listNow(ctx context.Context) ([]*mcp.Tool, error) {
	before := s.listing.Load()
	cs, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	if l := s.listing.Load(); l != nil && l != before {
		return l.tools, nil
	}
	tools, err := listTools(ctx, cs, s.spec.name)
	if err != nil {
		return nil, err
	}
	s.setListing(tools)
	return tools, nil
}

// discoverError is a server that could not be listed at registration.
func discoverError(manualName, server string, err error) error {
	if le := (*ListLimitError)(nil); asListLimit(err, &le) {
		return &manual.Error{Manual: manualName, Msg: le.Error()}
	}
	return err
}
