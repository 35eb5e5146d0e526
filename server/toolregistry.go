package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/toolstore"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// toolRegistry serves exprd.v1.ToolRegistry over the server's UTCP
// registry.
type toolRegistry struct {
	exprdv1.UnimplementedToolRegistryServer
	reg   *utcp.Registry
	store toolstore.Store // where writes go; it knows the operator's manuals
	log   *slog.Logger
	// authOn and writesWithoutAuth decide who may write (writable).
	authOn            bool
	writesWithoutAuth bool
}

// newToolRegistry serves the registry and writes through its store.
func newToolRegistry(o *options) *toolRegistry {
	return &toolRegistry{reg: o.registry, store: o.store, log: o.logger, authOn: o.tokens != nil,
		writesWithoutAuth: o.registryWritesWithoutAuth}
}

func (t *toolRegistry) RegisterManual(ctx context.Context, req *exprdv1.RegisterManualRequest) (*exprdv1.RegisterManualResponse, error) {
	if req.GetName() == "" {
		return nil, rpcstatus.BadRequest("name", "the manual needs a name")
	}
	if err := t.writable(ctx, req.GetName(), req.GetReplace()); err != nil {
		return nil, err
	}
	var src utcp.Source
	var field string
	var overTLS bool
	switch s := req.GetSource().(type) {
	case *exprdv1.RegisterManualRequest_Url:
		src, field = utcp.FromURL(s.Url), "url"
		if allowed := req.GetAllowedCommunicationProtocols(); len(allowed) > 0 {
			for i, p := range allowed {
				if !urlProtocols[p] {
					return nil, rpcstatus.BadRequest(fmt.Sprintf("allowed_communication_protocols[%d]", i),
						fmt.Sprintf("%q: a manual found by url may use http, streamable_http, sse and mcp", p))
				}
			}
			src = src.AllowProtocols(allowed...)
		}
	case *exprdv1.RegisterManualRequest_ManualJson:
		field = "manual_json"
		if inlineTemplate(s.ManualJson) {
			// An mcp manual call template, given inline: its servers are
			// connected to and listed (never a stdio one, which only the
			// operator may configure).
			src = utcp.FromTemplate(json.RawMessage(s.ManualJson))
			break
		}
		src = utcp.FromText(string(s.ManualJson)).AllowProtocols("http", "streamable_http", "sse", "grpc", "mcp")
	case *exprdv1.RegisterManualRequest_GrpcTarget:
		var err error
		if src, overTLS, err = t.grpcSource(s.GrpcTarget, req.GetGrpcSecurity()); err != nil {
			return nil, err
		}
		field = "grpc_target"
	default:
		return nil, rpcstatus.BadRequest("source", "give one of url, manual_json or grpc_target")
	}
	if field != "url" && len(req.GetAllowedCommunicationProtocols()) > 0 {
		return nil, rpcstatus.BadRequest("allowed_communication_protocols", "applies only to url; a manual_json says its own, a grpc_target's tools are grpc")
	}
	if field != "grpc_target" && req.GetGrpcSecurity() != exprdv1.RegisterManualRequest_GRPC_SECURITY_UNSPECIFIED {
		return nil, rpcstatus.BadRequest("grpc_security", "applies only to grpc_target; leave it unset for url and manual_json")
	}
	// A replacement is read and checked in full before it takes the old
	// one's place: a refused replacement leaves the old one.
	r, err := t.store.Register(ctx, req.GetName(), src, req.GetReplace())
	var te *utcp.TransportError
	if overTLS && errors.As(err, &te) && te.Reason == utcp.ReasonUnreachable {
		// A plaintext provider, or a certificate the server does not
		// trust, looks the same from here: say which checks were made.
		return nil, rpcstatus.New(codes.Unavailable, "the provider is unreachable over TLS: check that the target serves TLS "+
			"with a certificate the server trusts for that host", rpcstatus.Info(exprdv1.ErrorReason_PROVIDER_UNAVAILABLE), rpcstatus.Retry(time.Second))
	}
	if err != nil {
		return nil, t.registryStatus(err, field)
	}
	resp := &exprdv1.RegisterManualResponse{Tools: r.Tools, Manual: r.Manual}
	for _, sk := range r.Skipped {
		resp.Skipped = append(resp.Skipped, &exprdv1.SkippedTool{Name: sk.Name, Reason: sk.Reason, Registered: sk.Registered})
		t.log.Info("tool registry: part of a manual left out", "manual", r.Manual, "tool", sk.Name, "registered", sk.Registered, "reason", sk.Reason)
	}
	return resp, nil
}

// urlProtocols are the call template types a manual found by url may be
// allowed to use.
var urlProtocols = map[string]bool{"http": true, "streamable_http": true, "sse": true, "mcp": true}

// inlineTemplate reports whether a manual_json is a manual call template
// of type mcp ({"call_template_type": "mcp", "config": ...}) rather than a
// manual: the one template exprd discovers from inline JSON (the others
// have url and grpc_target).
func inlineTemplate(raw string) bool {
	var head struct {
		Type string `json:"call_template_type"`
	}
	return json.Unmarshal([]byte(raw), &head) == nil && head.Type == "mcp"
}

// grpcSource is the manual call template of a grpc_target: go-utcp's
// UTCPService at host:port, over TLS (reported as true) unless the target is
// a host plaintext may reach (one the egress policy lists) and the caller
// did not ask for TLS.
func (t *toolRegistry) grpcSource(target string, sec exprdv1.RegisterManualRequest_GrpcSecurity) (utcp.Source, bool, error) {
	host, port, err := net.SplitHostPort(target)
	if err != nil || host == "" {
		return utcp.Source{}, false, rpcstatus.BadRequest("grpc_target", "want host:port, e.g. tools.example.com:443 or 127.0.0.1:9339")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return utcp.Source{}, false, rpcstatus.BadRequest("grpc_target", "the port must be a number in [1, 65535]")
	}
	var useTLS bool
	switch sec {
	case exprdv1.RegisterManualRequest_GRPC_SECURITY_UNSPECIFIED:
		useTLS = !t.reg.PlaintextAllowed(host)
	case exprdv1.RegisterManualRequest_GRPC_SECURITY_TLS:
		useTLS = true
	case exprdv1.RegisterManualRequest_GRPC_SECURITY_PLAINTEXT:
		if !t.reg.PlaintextAllowed(host) {
			return utcp.Source{}, false, rpcstatus.BadRequest("grpc_security", "plaintext may reach only the hosts the operator lists; "+
				"leave grpc_security unset or set GRPC_SECURITY_TLS to reach this host over TLS")
		}
	default:
		return utcp.Source{}, false, rpcstatus.BadRequest("grpc_security", fmt.Sprintf("unknown value %d: GRPC_SECURITY_TLS or GRPC_SECURITY_PLAINTEXT, or unset", sec))
	}
	tmpl, _ := json.Marshal(map[string]any{"call_template_type": "grpc", "host": host, "port": port,
		"service_name": "grpcpb.UTCPService", "use_ssl": useTLS})
	return utcp.FromTemplate(tmpl), useTLS, nil
}

func (t *toolRegistry) DeregisterManual(ctx context.Context, req *exprdv1.DeregisterManualRequest) (*exprdv1.DeregisterManualResponse, error) {
	if req.GetName() == "" {
		return nil, rpcstatus.BadRequest("name", "the manual's name is empty")
	}
	if err := t.writable(ctx, req.GetName(), true); err != nil {
		return nil, err
	}
	r, err := t.store.Remove(ctx, req.GetName())
	if err != nil {
		return nil, t.registryStatus(err, "name")
	}
	return &exprdv1.DeregisterManualResponse{Tools: r.Tools, Manual: r.Manual}, nil
}

// toolInfo describes a tool: its schemas, title and annotations with
// TOOL_VIEW_FULL only; its drift (an MCP server that now lists another
// definition) in every view.
func (r *toolRegistry) toolInfo(t *manual.Tool, view exprdv1.ToolView) *exprdv1.ToolInfo {
	info := &exprdv1.ToolInfo{Name: t.Name, Manual: t.ManualName(), Description: t.Description, Tags: t.Tags}
	if view == exprdv1.ToolView_TOOL_VIEW_FULL {
		info.InputSchemaJson, info.OutputSchemaJson = jsonText(t.Inputs), jsonText(t.Outputs)
		info.Title = t.Title
		if a := t.Annotations; a != nil {
			info.Annotations = &exprdv1.ToolAnnotations{Title: a.Title, ReadOnlyHint: boolValue(a.ReadOnlyHint),
				DestructiveHint: boolValue(a.DestructiveHint), IdempotentHint: boolValue(a.IdempotentHint), OpenWorldHint: boolValue(a.OpenWorldHint)}
		}
	}
	if t.Template != nil {
		info.CallTemplateType = t.Template.Type
	}
	if d := r.reg.Drift(t.Name); d != nil {
		change := exprdv1.ToolDrift_CHANGE_CHANGED
		if d.Kind == utcp.DriftRemoved {
			change = exprdv1.ToolDrift_CHANGE_REMOVED
		}
		info.Drift = &exprdv1.ToolDrift{Change: change, RegisteredFingerprint: d.Registered, ListedFingerprint: d.Listed, Since: timestamppb.New(d.Since)}
	}
	return info
}

// utcpFunction is a host function backed by a registered UTCP tool: its
// schemas are the tool's, and a call dispatches through the registry under
// a span, its latency recorded by tool and outcome.
func (s *Server) utcpFunction(name string) (evaluator.Function, bool) {
	tool, err := s.opts.registry.Tool(name)
	if err != nil {
		return evaluator.Function{}, false
	}
	reg := s.opts.registry
	return evaluator.Function{
		Name: name, Description: tool.Description, InputSchema: tool.Inputs, OutputSchema: tool.Outputs,
		Runner: evaluator.RunServer,
		// Measured at the registry (ToolCallObserver), as every UTCP call.
		Impl: func(ctx context.Context, args map[string]any) (any, error) { return reg.Call(ctx, name, args) },
	}, true
}

// toolOutcome names a failed tool call's kind for metrics.
func toolOutcome(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, utcp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, manual.ErrInvalidArguments):
		return "invalid_arguments"
	case errors.Is(err, utcp.ErrTransport):
		return "transport"
	}
	return "error"
}

// boolValue is a hint as the API carries it: nil when the provider gave
// none.
func boolValue(b *bool) *wrapperspb.BoolValue {
	if b == nil {
		return nil
	}
	return wrapperspb.Bool(*b)
}
