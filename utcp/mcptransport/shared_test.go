package mcptransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/mcptransport"
	"github.com/exprd/exprd/utcp/utcpall"
)

// A manual as a store shares it (resolved on one replica, applied on
// another without discovery): the other replica connects itself, with
// its own variables, and checks drift against the fingerprints the
// manual carries.
func TestSharedManualOnAnotherReplica(t *testing.T) {
	t.Parallel()
	srv := startGoServer(t, false, nil, func(s *mcp.Server) { echoTool(s, "Echoes.") })
	var auth atomic.Value
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		proxy(w, r, srv.URL)
	}))
	t.Cleanup(front.Close)
	tmpl, _ := json.Marshal(map[string]any{"call_template_type": "mcp", "config": map[string]any{"mcpServers": map[string]any{
		"s": map[string]any{"url": front.URL, "headers": map[string]string{"Authorization": "Bearer ${TOKEN}"}}}}})

	writer, _ := newRegistry(t, utcp.WithVariables(map[string]string{"m_TOKEN": "writer-secret"}))
	res, err := writer.Resolve(context.Background(), "m", utcp.FromTemplate(tmpl))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := auth.Load().(string); got != "Bearer writer-secret" {
		t.Errorf("the writer sent Authorization %q", got)
	}
	shared, _ := json.Marshal(res.Manual)
	if strings.Contains(string(shared), "writer-secret") || !strings.Contains(string(shared), "${TOKEN}") {
		t.Fatalf("the shared manual: %s", shared)
	}

	m, err := manual.Parse(shared)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := newRegistry(t, utcp.WithVariables(map[string]string{"m_TOKEN": "other-secret"}))
	if _, err := other.Register(context.Background(), "m", utcp.FromManual(m)); err != nil {
		t.Fatal(err)
	}
	if v, err := other.Call(context.Background(), "m.s.echo", nil); err != nil || v != "echo" {
		t.Fatalf("call on the other replica: %v, %v", v, err)
	}
	if got, _ := auth.Load().(string); got != "Bearer other-secret" {
		t.Errorf("the other replica sent Authorization %q", got)
	}
	// It sees drift against the shared fingerprints.
	echoTool(srv.Server, "Echoes louder.")
	eventually(t, "the other replica to see the drift", func() bool {
		_, err := other.Call(context.Background(), "m.s.echo", nil)
		return reason(err) == mcptransport.ReasonDrift
	})
}

// A variable with no value refuses the template before anything is sent.
func TestUnboundVariableRefused(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(hs.Close)
	tmpl, _ := json.Marshal(map[string]any{"call_template_type": "mcp", "config": map[string]any{"mcpServers": map[string]any{
		"s": map[string]any{"url": hs.URL, "headers": map[string]string{"X-Key": "${KEY}"}}}}})
	reg, _ := newRegistry(t)
	_, err := reg.Register(context.Background(), "m", utcp.FromTemplate(tmpl))
	if err == nil || !strings.Contains(err.Error(), `"m_KEY"`) || hits.Load() != 0 {
		t.Errorf("got %v with %d requests, want the variable refused and nothing sent", err, hits.Load())
	}
}

// The egress policy holds at registration for what it can judge before
// any DNS: an IP literal it refuses, plain http:// to a host it does not
// list.
func TestEgressAtRegistration(t *testing.T) {
	t.Parallel()
	reg, err := utcpall.New() // public addresses only, over TLS
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	for url, want := range map[string]string{
		"https://169.254.169.254/mcp": "exprd may not connect to 169.254.169.254",
		"http://mcp.example.com/mcp":  "without TLS only the hosts the operator lists may be reached",
	} {
		_, err := reg.Register(context.Background(), "m", utcp.FromTemplate(mcpManual(map[string]string{"s": url})))
		if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), "config.mcpServers.s.url: "+want) {
			t.Errorf("%s: got %v, want %q", url, err, want)
		}
	}
}
