package utcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/exprd/exprd/internal/testkit/benchpair"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/utcpall"
)

// BenchmarkWarmCall compares a warm HTTP tool call through the registry
// (schema check, template, request mapping, deadline, decoding) with the
// same request made with a bare net/http client, without a deadline ("bare")
// and under the same 10 s deadline the registry sets ("bare+deadline").
// Goal: registry ≤ 1.1× bare.
func BenchmarkWarmCall(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result":5}`)
	}))
	defer srv.Close()

	r, err := utcpall.New(utcptest.LoopbackEgress)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	inputs := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}, "b": map[string]any{"type": "number"}}, "required": []any{"a", "b"}}
	manual := utcptest.ManualOf("add", inputs, map[string]any{"call_template_type": "http", "http_method": "POST", "url": srv.URL + "/math/add"})
	if _, err := r.Register(context.Background(), "math", utcp.FromText(manual).AllowProtocols("http")); err != nil {
		b.Fatal(err)
	}
	args := map[string]any{"a": 2.0, "b": 3.0}
	registry := func(b *testing.B) {
		if _, err := r.Call(context.Background(), "math.add", args); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("registry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			registry(b)
		}
	})
	bare, closeBare := bareCall(srv.URL, false)
	defer closeBare()
	withDeadline, closeDeadline := bareCall(srv.URL, true)
	defer closeDeadline()
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bare(b)
		}
	})
	b.Run("bare+deadline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			withDeadline(b)
		}
	})
	// The registry and the bare call in each iteration: "ratio" is
	// registry/bare.
	b.Run("interleaved", func(b *testing.B) { benchpair.Interleave(b, registry, bare) })
}

// bareCall makes the registry's request with a bare net/http client of
// its own, under the registry's default deadline or none; closeIdle ends
// its connections.
func bareCall(url string, deadline bool) (call func(b *testing.B), closeIdle func()) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = utcp.DefaultMaxIdleConnsPerHost
	client := &http.Client{Transport: tr}
	return func(b *testing.B) {
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if deadline {
			ctx, cancel = context.WithTimeout(ctx, utcp.DefaultTimeout)
		}
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/math/add?a=2&b=3", nil)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}, tr.CloseIdleConnections
}
