package mcpserve

import (
	"context"
	"net/http"
	"reflect"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the spans' instrumentation scope.
const tracerName = "github.com/exprd/exprd/mcpserve"

// propagator reads a request's trace context: W3C trace context and
// baggage, as MCP carries them in _meta (traceparent, tracestate,
// baggage), else in the HTTP request's headers.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// metaCarrier is a request's _meta as a TextMapCarrier: its string
// values only, read-only.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(string, string) {}

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if _, ok := v.(string); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// tracing is the receiving middleware that gives each request a server
// span, "METHOD" or "tools/call TOOL" as OpenTelemetry's MCP conventions
// name them, the child of the trace context its _meta carries (or its
// HTTP headers, when _meta carries none): the tool's work, and the
// registry calls it makes, are its children. A tool result with isError
// sets the span's status to error.
func (h *Handler) tracing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		var meta map[string]any
		var header http.Header
		if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() { // a request without params has a nil *Params
			meta = p.GetMeta()
		}
		if e := req.GetExtra(); e != nil {
			header = e.Header
		}
		if metaCarrier(meta).Get("traceparent") != "" {
			ctx = propagator.Extract(ctx, metaCarrier(meta))
		} else if header != nil {
			ctx = propagator.Extract(ctx, propagation.HeaderCarrier(header))
		}
		name := method
		attrs := []attribute.KeyValue{attribute.String("mcp.method.name", method)}
		if ct, ok := req.(*mcp.CallToolRequest); ok && ct.Params != nil {
			name += " " + ct.Params.Name
			attrs = append(attrs, attribute.String("gen_ai.tool.name", ct.Params.Name), attribute.String("gen_ai.operation.name", "execute_tool"))
		}
		if sr, ok := req.(interface{ ProtocolVersion() string }); ok && sr.ProtocolVersion() != "" {
			attrs = append(attrs, attribute.String("mcp.protocol.version", sr.ProtocolVersion()))
		}
		ctx, span := h.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		defer func() {
			// A panic below (a handler's, the SDK's) is this request's
			// internal error, not the process's end.
			if p := recover(); p != nil {
				h.log.ErrorContext(ctx, "mcp: a request panicked", "method", method, "panic", p, "stack", string(debug.Stack()))
				span.SetStatus(otelcodes.Error, "panic")
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "exprd failed to serve this request"}
			}
		}()
		res, err = next(ctx, method, req)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(otelcodes.Error, err.Error())
		} else if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			span.SetAttributes(attribute.String("error.type", "tool_error"))
			span.SetStatus(otelcodes.Error, "the tool's result is an error")
		}
		return res, err
	}
}
