package server

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/utcp"
	// RegisterManual's grpc_target, and manuals of grpc tools, need it.
	_ "github.com/exprd/exprd/utcp/grpctransport"
)

// DefaultSearchLimit is how many tools SearchTools returns when the request
// does not say.
const DefaultSearchLimit = 10

// toolRegistry serves exprd.v1.ToolRegistry over the server's UTCP
// registry.
type toolRegistry struct {
	exprdv1.UnimplementedToolRegistryServer
	reg *utcp.Registry
}

func (t *toolRegistry) RegisterManual(ctx context.Context, req *exprdv1.RegisterManualRequest) (*exprdv1.RegisterManualResponse, error) {
	if req.GetName() == "" {
		return nil, badRequest("name", "the manual needs a name")
	}
	var src utcp.Source
	switch s := req.GetSource().(type) {
	case *exprdv1.RegisterManualRequest_Url:
		src = utcp.FromURL(s.Url)
	case *exprdv1.RegisterManualRequest_ManualJson:
		src = utcp.FromText(string(s.ManualJson)).AllowProtocols("http", "streamable_http", "sse", "grpc")
	case *exprdv1.RegisterManualRequest_GrpcTarget:
		host, port, err := net.SplitHostPort(s.GrpcTarget)
		if err != nil {
			return nil, badRequest("grpc_target", "want host:port")
		}
		tmpl, _ := json.Marshal(map[string]any{"call_template_type": "grpc", "host": host, "port": port, "service_name": "grpcpb.UTCPService"})
		src = utcp.FromTemplate(tmpl)
	default:
		return nil, badRequest("source", "give one of url, manual_json or grpc_target")
	}
	if req.GetReplace() {
		_ = t.reg.Deregister(req.GetName())
	}
	r, err := t.reg.Register(ctx, req.GetName(), src)
	if err != nil {
		return nil, registryStatus(err)
	}
	return &exprdv1.RegisterManualResponse{Tools: r.Tools}, nil
}

func (t *toolRegistry) DeregisterManual(_ context.Context, req *exprdv1.DeregisterManualRequest) (*exprdv1.DeregisterManualResponse, error) {
	var names []string
	for _, tool := range t.reg.List() {
		if tool.ManualName() == req.GetName() {
			names = append(names, tool.Name)
		}
	}
	if err := t.reg.Deregister(req.GetName()); err != nil {
		return nil, registryStatus(err)
	}
	return &exprdv1.DeregisterManualResponse{Tools: names}, nil
}

func (t *toolRegistry) ListTools(_ context.Context, req *exprdv1.ListToolsRequest) (*exprdv1.ListToolsResponse, error) {
	out := &exprdv1.ListToolsResponse{}
	for _, tool := range t.reg.List() {
		if req.GetManual() == "" || tool.ManualName() == req.GetManual() {
			out.Tools = append(out.Tools, toolInfo(tool))
		}
	}
	return out, nil
}

func (t *toolRegistry) SearchTools(_ context.Context, req *exprdv1.SearchToolsRequest) (*exprdv1.SearchToolsResponse, error) {
	if strings.TrimSpace(req.GetQuery()) == "" {
		return nil, badRequest("query", "the query is empty")
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = DefaultSearchLimit
	}
	out := &exprdv1.SearchToolsResponse{}
	for _, r := range t.reg.Search(req.GetQuery(), limit) {
		out.Tools = append(out.Tools, &exprdv1.ScoredTool{Tool: toolInfo(r.Tool), Score: r.Score})
	}
	return out, nil
}

func toolInfo(t *utcp.Tool) *exprdv1.ToolInfo {
	info := &exprdv1.ToolInfo{Name: t.Name, Manual: t.ManualName(), Description: t.Description, Tags: t.Tags,
		InputSchemaJson: t.Inputs, OutputSchemaJson: t.Outputs}
	if t.Template != nil {
		info.CallTemplateType = t.Template.Type
	}
	return info
}

// registryStatus maps the registry's errors to codes; the messages are the
// registry's own, which name paths and keys but hold no provider's text.
func registryStatus(err error) error {
	var me *utcp.ManualError
	switch {
	case errors.As(err, &me) && strings.Contains(me.Msg, "already registered"):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, utcp.ErrInvalidManual), errors.Is(err, utcp.ErrVariableNotFound):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, utcp.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, utcp.ErrTimeout):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, utcp.ErrTransport):
		return status.Error(codes.Unavailable, err.Error())
	}
	return status.Error(codes.Internal, "internal error")
}

// utcpFunction is a host function backed by a registered UTCP tool: its
// schemas are the tool's, and a call dispatches through the registry under
// a span, its latency recorded by tool and outcome.
func (s *Server) utcpFunction(name string) (evaluator.Function, bool) {
	tool, err := s.opts.registry.Tool(name)
	if err != nil {
		return evaluator.Function{}, false
	}
	reg, m := s.opts.registry, s.metrics
	return evaluator.Function{
		Name: name, Description: tool.Description, InputSchema: tool.Inputs, OutputSchema: tool.Outputs,
		Runner: evaluator.RunServer,
		Impl: func(ctx context.Context, args map[string]any) (any, error) {
			ctx, span := s.tracer.Start(ctx, "exprd.tool.call", trace.WithAttributes(attribute.String("exprd.tool", name)))
			defer span.End()
			start := time.Now()
			res, err := reg.Call(ctx, name, args)
			outcome := "ok"
			if err != nil {
				outcome = toolOutcome(err)
				span.SetStatus(otelcodes.Error, outcome)
			}
			m.toolTime.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(
				attribute.String("tool", name), attribute.String("outcome", outcome)))
			return res, err
		},
	}, true
}

// toolOutcome names a failed tool call's kind for metrics.
func toolOutcome(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, utcp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, utcp.ErrInvalidArguments):
		return "invalid_arguments"
	case errors.Is(err, utcp.ErrTransport):
		return "transport"
	}
	return "error"
}
