package grpctransport

import (
	"context"
	"encoding/json"
	"maps"
	"strings"

	"google.golang.org/grpc"

	"github.com/exprd/exprd/gen/grpcpb"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// UTCPService methods a template may name.
const (
	methodCallTool       = "CallTool"
	methodCallToolStream = "CallToolStream"
)

// utcpTransport calls go-utcp's UTCPService: Call is CallTool, Stream is
// CallToolStream, discovery is GetManual.
type utcpTransport struct {
	spec  *spec
	conns *conns
	// streamCall: the template names CallToolStream, so Call collects the
	// stream's chunks rather than calling CallTool.
	streamCall bool
}

var (
	_ utcp.Transport  = (*utcpTransport)(nil)
	_ utcp.Discoverer = (*utcpTransport)(nil)
)

// Call sends CallTool{tool, args_json} and returns result_json decoded as
// JSON, or as text when it is not JSON (nil when empty).
func (x *utcpTransport) Call(ctx context.Context, t *manual.Tool, args map[string]any) (any, error) {
	if x.streamCall {
		st, err := x.stream(ctx, t, args)
		if err != nil {
			return nil, err
		}
		return collect(st, x.conns.env.ResponseLimit(ctx))
	}
	sc, err := x.conns.get(t.Name)
	if err != nil {
		return nil, err
	}
	req, err := x.request(t, args)
	if err != nil {
		return nil, err
	}
	resp, err := sc.utcp.CallTool(x.spec.outgoing(ctx), req, grpc.MaxCallRecvMsgSize(int(x.conns.env.ResponseLimit(ctx))))
	if err != nil {
		return nil, x.spec.rpcError(ctx, err, t.Name, false)
	}
	return decodeResult(resp.GetResultJson()), nil
}

// Stream sends CallToolStream{tool, args_json}; each response's result_json
// is one chunk, decoded as in Call.
func (x *utcpTransport) Stream(ctx context.Context, t *manual.Tool, args map[string]any) (utcp.Stream, error) {
	return x.stream(ctx, t, args)
}

func (x *utcpTransport) stream(ctx context.Context, t *manual.Tool, args map[string]any) (*rpcStream, error) {
	sc, err := x.conns.get(t.Name)
	if err != nil {
		return nil, err
	}
	req, err := x.request(t, args)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(x.spec.outgoing(ctx))
	cs, err := sc.utcp.CallToolStream(sctx, req, grpc.MaxCallRecvMsgSize(int(x.conns.env.ResponseLimit(ctx))))
	if err != nil {
		cancel()
		return nil, x.spec.rpcError(ctx, err, t.Name, false)
	}
	return &rpcStream{ctx: ctx, cancel: cancel, spec: x.spec, tool: t.Name, recv: func() (any, int, error) {
		resp, err := cs.Recv()
		if err != nil {
			return nil, 0, err
		}
		return decodeResult(resp.GetResultJson()), len(resp.GetResultJson()), nil
	}}, nil
}

// request builds the provider's request: the tool under the provider's own
// name (tool_name, else the registered name without its manual prefix).
func (x *utcpTransport) request(t *manual.Tool, args map[string]any) (*grpcpb.ToolCallRequest, error) {
	payload, err := json.Marshal(args)
	if err != nil {
		return nil, &manual.InvalidArgumentsError{Tool: t.Name, Problems: []string{"arguments are not JSON: " + err.Error()}}
	}
	name := x.spec.toolName
	if name == "" {
		name = t.Name
		if m := t.ManualName(); m != "" {
			name = strings.TrimPrefix(name, m+".")
		}
	}
	return &grpcpb.ToolCallRequest{Tool: name, ArgsJson: string(payload)}, nil
}

// decodeResult reads result_json: JSON when it parses, else the text.
func decodeResult(s string) any {
	if s == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	return v
}

// Discover calls GetManual and returns it as a UTCP manual whose tools call
// back through this template (CallTool, with tool_name set to the
// provider's name). GetManual carries names and descriptions only, so each
// tool's inputs are {"type": "object"}.
func (x *utcpTransport) Discover(ctx context.Context) (*utcp.Document, error) {
	sc, err := x.conns.get("")
	if err != nil {
		return nil, err
	}
	m, err := sc.utcp.GetManual(x.spec.outgoing(ctx), &grpcpb.Empty{})
	if err != nil {
		return nil, x.spec.rpcError(ctx, err, "", false)
	}
	version := m.GetVersion()
	if version == "" {
		version = manual.DefaultUTCPVersion
	}
	type tool struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Inputs      map[string]any `json:"inputs"`
		Template    map[string]any `json:"tool_call_template"`
	}
	tools := make([]tool, 0, len(m.GetTools()))
	for _, t := range m.GetTools() {
		tools = append(tools, tool{
			Name:        t.GetName(),
			Description: t.GetDescription(),
			Inputs:      map[string]any{"type": "object"},
			Template:    x.toolTemplate(t.GetName()),
		})
	}
	body, err := json.Marshal(map[string]any{"utcp_version": version, "tools": tools})
	if err != nil {
		return nil, &utcp.TransportError{Reason: utcp.ReasonMalformed}
	}
	return &utcp.Document{Body: body, ContentType: "application/json"}, nil
}

// toolTemplate is the discovery template made a tool's: same provider,
// security, target, auth and timeout; CallTool under the provider's name.
func (x *utcpTransport) toolTemplate(name string) map[string]any {
	t := maps.Clone(x.spec.fields)
	delete(t, "name")
	delete(t, "allowed_communication_protocols")
	t["call_template_type"] = Type
	t["service_name"] = UTCPService
	t["method_name"] = methodCallTool
	t["tool_name"] = name
	return t
}
