// Package utcptest has what the tests of utcp and its subpackages share:
// a loopback HTTP provider that records what it is sent, and registries
// with every part (utcpall) that may reach it.
package utcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
	"github.com/exprd/exprd/utcp/vars"
)

// Received is what a loopback provider saw of one request.
type Received struct {
	Method string
	URI    string // as sent: escaped path and raw query
	Query  string
	Header http.Header
	Body   string
}

// Provider is a loopback HTTP provider that records every request and
// answers with its handler (default: 200 {"ok": true}).
type Provider struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []Received
}

// NewProvider starts a Provider, closed when the test ends.
func NewProvider(t testing.TB, handler http.HandlerFunc) *Provider {
	t.Helper()
	p := &Provider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		p.reqs = append(p.reqs, Received{Method: r.Method, URI: r.RequestURI, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(body)})
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

// Requests are the requests the provider has seen, in order.
func (p *Provider) Requests() []Received {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Received(nil), p.reqs...)
}

// LoopbackEgress lets a test registry reach its providers on loopback.
var LoopbackEgress = utcp.WithEgress(egress.MustParse("loopback"))

// EveryVariable binds a value to every variable of every manual, for tests
// of manuals whose templates carry ${VAR}s (the operator binds them).
var EveryVariable = utcp.WithVariableLoader(vars.LoaderFunc(func(string) (string, bool) { return "test-value", true }))

// NewRegistry is utcpall.New(LoopbackEgress, opts...), closed when the
// test ends.
func NewRegistry(t testing.TB, opts ...utcp.Option) *utcp.Registry {
	t.Helper()
	r, err := utcpall.New(append([]utcp.Option{LoopbackEgress}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// ManualOf builds a one-tool manual whose template is tmpl.
func ManualOf(tool string, inputs, tmpl map[string]any) string {
	t := map[string]any{"name": tool, "description": "test tool", "tool_call_template": tmpl}
	if inputs != nil {
		t["inputs"] = inputs
	}
	raw, _ := json.Marshal(map[string]any{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": []any{t}})
	return string(raw)
}

// Register registers an inline manual allowing the HTTP-family transports.
func Register(t testing.TB, r *utcp.Registry, name, manual string) *utcp.Registration {
	t.Helper()
	reg, err := r.Register(context.Background(), name, utcp.FromText(manual).AllowProtocols(utcp.TypeHTTP, utcp.TypeStreamableHTTP, utcp.TypeSSE))
	if err != nil {
		t.Fatalf("Register: %v", err)
	}
	return reg
}

// Drain reads a stream to its end and closes it: the chunks, and the
// error that ended it (nil at io.EOF).
func Drain(t testing.TB, st utcp.Stream) ([]any, error) {
	t.Helper()
	defer st.Close()
	var out []any
	for {
		v, err := st.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
}

// Seeds adds every file of utcp/testdata matching the patterns
// ("manuals/*.json") to a fuzz target's corpus.
func Seeds(f *testing.F, patterns ...string) {
	f.Helper()
	_, here, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(here), "..", "..", "testdata")
	for _, p := range patterns {
		files, err := filepath.Glob(filepath.Join(dir, p))
		if err != nil || len(files) == 0 {
			f.Fatalf("seeds %s: %v (%d files)", p, err, len(files))
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
}
