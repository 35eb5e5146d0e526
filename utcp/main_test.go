package utcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// received is what a loopback provider saw of one request.
type received struct {
	Method string
	URI    string // as sent: escaped path and raw query
	Query  string
	Header http.Header
	Body   string
}

// provider is a loopback HTTP provider that records every request and
// answers with handler (default: 200 {"ok": true}).
type provider struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []received
}

func newProvider(t testing.TB, handler http.HandlerFunc) *provider {
	t.Helper()
	p := &provider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		p.reqs = append(p.reqs, received{Method: r.Method, URI: r.RequestURI, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(body)})
		p.mu.Unlock()
		if handler != nil {
			handler(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *provider) requests() []received {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]received(nil), p.reqs...)
}

func newRegistry(t *testing.T, opts ...utcp.Option) *utcp.Registry {
	t.Helper()
	r, err := utcp.New(append([]utcp.Option{loopbackEgress}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// manualOf builds a one-tool manual whose template is tmpl.
func manualOf(tool string, inputs, tmpl map[string]any) string {
	t := map[string]any{"name": tool, "description": "test tool", "tool_call_template": tmpl}
	if inputs != nil {
		t["inputs"] = inputs
	}
	raw, _ := json.Marshal(map[string]any{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": []any{t}})
	return string(raw)
}

// register registers an inline manual allowing the built-in transports.
func register(t *testing.T, r *utcp.Registry, name, manual string) *utcp.Registration {
	t.Helper()
	reg, err := r.Register(context.Background(), name, utcp.FromText(manual).AllowProtocols(utcp.TypeHTTP, utcp.TypeStreamableHTTP, utcp.TypeSSE))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	return reg
}

// loopbackEgress lets a test registry reach its providers on loopback.
var loopbackEgress = utcp.WithEgress(egress.MustParse("loopback"))

// everyVariable binds a value to every variable of every manual, for tests
// of manuals whose templates carry ${VAR}s (the operator binds them).
var everyVariable = utcp.WithVariableLoader(utcp.VariableLoaderFunc(func(string) (string, bool) { return "test-value", true }))
