package mcpserve_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/exprd/exprd/mcpserve"
)

// Each request is a server span, the child of the trace context its
// _meta carries (traceparent, as the 2026-07-28 revision and the older
// ones carry it alike); a tool error marks it an error.
func TestSpansFollowMetaTraceparent(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), TracerProvider: tp})
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	for _, rev := range []string{"2026-07-28", "2025-06-18"} {
		cs := connect(t, url, rev, "")
		for _, tc := range []struct {
			code    string
			isError bool
		}{
			{`codemode.CallTool("math.add", {"a": 1, "b": 2})`, false},
			{`1 +`, true},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool_chain", Arguments: map[string]any{"code": tc.code},
				Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + spanID + "-01"}})
			cancel()
			if err != nil || res.IsError != tc.isError {
				t.Fatalf("%s %s: %v %v", rev, tc.code, err, res)
			}
			var found sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.Name() == "tools/call call_tool_chain" && s.Parent().SpanID().String() == spanID && s.Status().Code == map[bool]codes.Code{true: codes.Error, false: codes.Unset}[tc.isError] {
					found = s
				}
			}
			if found == nil {
				t.Fatalf("%s %s: no span tools/call call_tool_chain, child of the _meta's, with the result's status; spans: %v", rev, tc.code, names(rec.Ended()))
			}
			if found.SpanContext().TraceID().String() != traceID || found.SpanKind() != trace.SpanKindServer {
				t.Errorf("%s: span %v in trace %s, want a server span in %s", rev, found.Name(), found.SpanContext().TraceID(), traceID)
			}
			var attrs []string
			for _, a := range found.Attributes() {
				attrs = append(attrs, string(a.Key)+"="+a.Value.String())
			}
			if s := strings.Join(attrs, " "); !strings.Contains(s, "mcp.method.name=tools/call") || !strings.Contains(s, "gen_ai.tool.name=call_tool_chain") {
				t.Errorf("%s: attributes %s", rev, s)
			}
		}
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name()+"<"+s.Parent().SpanID().String())
	}
	return out
}

// A request without params (a bare tools/list, as the TypeScript SDK's
// listTools() and the MCP Inspector send it) is traced and answered: its
// nil params once took the process down.
func TestRequestWithoutParams(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t)})
	for range 2 {
		resp := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if body := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(body, "call_tool_chain") {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
}
