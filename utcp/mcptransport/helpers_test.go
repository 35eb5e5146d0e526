package mcptransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
)

// goServer is a go-sdk MCP server on loopback, over streamable HTTP:
// stateless (the 2026-07-28 revision) or with sessions (2025-11-25).
type goServer struct {
	*mcp.Server
	URL string
}

func startGoServer(t testing.TB, stateless bool, opts *mcp.ServerOptions, add func(*mcp.Server)) *goServer {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	if add != nil {
		add(s)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless, PropagateRequestCancellation: stateless})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &goServer{Server: s, URL: hs.URL}
}

// mcpManual is an mcp manual call template naming servers by name → URL.
func mcpManual(servers map[string]string) json.RawMessage {
	cfg := map[string]any{}
	for name, url := range servers {
		cfg[name] = map[string]any{"transport": "http", "url": url}
	}
	raw, _ := json.Marshal(map[string]any{"call_template_type": "mcp", "config": map[string]any{"mcpServers": cfg}})
	return raw
}

// logs collects what the registry logs.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += fmt.Sprintf(" %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }
func (l *logs) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func newRegistry(t testing.TB, opts ...utcp.Option) (*utcp.Registry, *logs) {
	t.Helper()
	l := &logs{}
	return utcptest.NewRegistry(t, append([]utcp.Option{utcp.WithLogger(slog.New(l))}, opts...)...), l
}

// textTool adds a tool answering text.
func textTool(s *mcp.Server, name string, answer func(args map[string]any) string) {
	s.AddTool(&mcp.Tool{Name: name, Description: "answers " + name, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: answer(args)}}}, nil
		})
}
