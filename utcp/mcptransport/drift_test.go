package mcptransport_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/mcptransport"
)

func echoTool(s *mcp.Server, description string) {
	s.AddTool(&mcp.Tool{Name: "echo", Description: description, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo"}}}, nil
		})
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDriftAtListChanged(t *testing.T) {
	t.Parallel()
	srv := startGoServer(t, false, nil, func(s *mcp.Server) {
		echoTool(s, "Echoes.")
		textTool(s, "other", func(map[string]any) string { return "o" })
	})
	reg, logs := newRegistry(t)
	register(t, reg, srv.URL)
	if v, err := reg.Call(context.Background(), "m.s.echo", nil); err != nil || v != "echo" {
		t.Fatalf("before: %v, %v", v, err)
	}
	if d := reg.Drift("m.s.echo"); d != nil {
		t.Fatalf("drift before any change: %+v", d)
	}
	// The server changes the tool: it notifies its sessions.
	echoTool(srv.Server, "Deletes everything.")
	eventually(t, "the drift to be seen", func() bool { return reg.Drift("m.s.echo") != nil })
	d := reg.Drift("m.s.echo")
	if d.Kind != utcp.DriftChanged || d.Registered == d.Listed || !strings.HasPrefix(d.Listed, "sha256:") {
		t.Errorf("drift: %+v", d)
	}
	_, err := reg.Call(context.Background(), "m.s.echo", nil)
	if reason(err) != mcptransport.ReasonDrift {
		t.Errorf("call after the change: got %v, want definition-changed", err)
	}
	// The registered definition is kept; the other tool is unaffected.
	if tool, _ := reg.Tool("m.s.echo"); tool.Description != "Echoes." {
		t.Errorf("registered description: %q", tool.Description)
	}
	if v, err := reg.Call(context.Background(), "m.s.other", nil); err != nil || v != "o" {
		t.Errorf("other: %v, %v", v, err)
	}
	logged := 0
	for _, l := range logs.all() {
		if strings.Contains(l, "another definition") && strings.Contains(l, "tool=echo") {
			logged++
		}
	}
	if logged != 1 {
		t.Errorf("the change was logged %d times, want once: %v", logged, logs.all())
	}
	// Removal is drift too.
	srv.RemoveTools("other")
	eventually(t, "the removal to be seen", func() bool { d := reg.Drift("m.s.other"); return d != nil && d.Kind == utcp.DriftRemoved })
	// Registering again with replace adopts what the server lists.
	if _, err := reg.Replace(context.Background(), "m", utcp.FromTemplate(mcpManual(map[string]string{"s": srv.URL}))); err != nil {
		t.Fatal(err)
	}
	if tool, _ := reg.Tool("m.s.echo"); tool.Description != "Deletes everything." || reg.Drift("m.s.echo") != nil {
		t.Errorf("after replace: %q, drift %+v", tool.Description, reg.Drift("m.s.echo"))
	}
	if v, err := reg.Call(context.Background(), "m.s.echo", nil); err != nil || v != "echo" {
		t.Errorf("after replace: %v, %v", v, err)
	}
	if _, err := reg.Tool("m.s.other"); err == nil {
		t.Errorf("m.s.other is still registered after replace")
	}
}

func TestDriftAtReconnect(t *testing.T) {
	t.Parallel()
	first := startGoServer(t, false, nil, func(s *mcp.Server) { echoTool(s, "Echoes.") })
	second := startGoServer(t, false, nil, func(s *mcp.Server) { echoTool(s, "Echoes, and more.") })
	var target atomic.Value
	target.Store(first.URL)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxy(w, r, target.Load().(string)) }))
	t.Cleanup(front.Close)
	reg, _ := newRegistry(t)
	register(t, reg, front.URL)
	if _, err := reg.Call(context.Background(), "m.s.echo", nil); err != nil {
		t.Fatal(err)
	}
	// The server is redeployed with another definition and without the
	// old sessions: exprd's session ends, and the next one lists anew.
	target.Store(second.URL)
	eventually(t, "a new session to list the changed tool", func() bool {
		_, err := reg.Call(context.Background(), "m.s.echo", nil)
		return reason(err) == mcptransport.ReasonDrift
	})
	if d := reg.Drift("m.s.echo"); d == nil || d.Kind != utcp.DriftChanged {
		t.Errorf("drift: %+v", d)
	}
}
