package mcpserve_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/exprd/exprd/mcpserve"
)

// Without a good token the endpoint answers 401 (403 for a token without
// the mcp scope) with WWW-Authenticate naming the Protected Resource
// Metadata, which it serves.
func TestAuthRefusals(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Verify: verifier})
	base := strings.TrimSuffix(url, mcpserve.Path)
	wantHeader := `Bearer resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp", scope="mcp"`
	tests := []struct {
		name, token string
		status      int
		body        string
	}{
		{"no token", "", http.StatusUnauthorized, "no bearer token"},
		{"an unknown token", "token-nobody-0000000", http.StatusUnauthorized, "the bearer token is not known"},
		{"a token without the mcp scope", tokenNoMCP, http.StatusForbidden, "insufficient scope"},
		{"a token with it", tokenMCP, http.StatusOK, `"tools"`},
		{"a token with every scope", tokenAll, http.StatusOK, `"tools"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := post(t, url, tt.token, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			body := readAll(t, resp)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.body) {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tt.status, tt.body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); tt.status != http.StatusOK && got != wantHeader {
				t.Errorf("WWW-Authenticate: %q, want %q", got, wantHeader)
			}
		})
	}
	for _, path := range []string{mcpserve.MetadataPath, mcpserve.MetadataPath + mcpserve.Path} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		var md struct {
			Resource        string   `json:"resource"`
			ScopesSupported []string `json:"scopes_supported"`
			Bearer          []string `json:"bearer_methods_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || md.Resource != url || !slices.Equal(md.ScopesSupported, []string{"mcp"}) || !slices.Equal(md.Bearer, []string{"header"}) {
			t.Errorf("%s: %d %+v %v", path, resp.StatusCode, md, err)
		}
	}
	// The go-sdk client at each revision: refused without a token, served
	// with one.
	for _, rev := range revisions {
		if _, err := dial(url, rev, ""); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
			t.Errorf("%s without a token: %v, want Unauthorized", rev, err)
		}
		cs := connect(t, url, rev, tokenMCP)
		if res := call(t, cs, "call_tool_chain", map[string]any{"code": chain}); res.IsError {
			t.Errorf("%s with a token: %s", rev, text(res))
		}
	}
}

// countingBody counts the bytes read of it.
type countingBody struct {
	r    io.Reader
	read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { return nil }

// The token is checked before a byte of the body is read.
func TestAuthBeforeTheBody(t *testing.T) {
	t.Parallel()
	h, err := mcpserve.New(mcpserve.Config{Registry: demoRegistry(t), Verify: verifier})
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"", "token-nobody-0000000", tokenNoMCP, tokenMCP} {
		body := &countingBody{r: strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)}
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch {
		case token == tokenMCP && (w.Code != 200 || body.read.Load() == 0):
			t.Errorf("a good token: %d, %d bytes read", w.Code, body.read.Load())
		case token != tokenMCP && body.read.Load() != 0:
			t.Errorf("token %q: %d bytes of the body read before the refusal (%d)", token, body.read.Load(), w.Code)
		}
	}
}

// A token's tools: scopes say which tools it sees and may call, in code
// mode and in gateway mode alike.
func TestScopesLimitTheTools(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Verify: verifier, Expose: mcpserve.ExposeBoth})
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			cs := connect(t, url, rev, tokenMath)
			names, _ := listAll(t, cs)
			for _, n := range names {
				if strings.HasPrefix(n, "catalog.") {
					t.Errorf("listed %s to a token of tools:math", n)
				}
			}
			if !slices.Contains(names, "math.add") || !slices.Contains(names, "call_tool_chain") {
				t.Errorf("listed %v, want math's tools and code mode's", names)
			}
			res := call(t, cs, "search_tools", map[string]any{"task_description": "find a product by its name", "limit": 50})
			for _, tool := range structuredAs[struct{ Tools []struct{ Name string } }](t, res).Tools {
				if !strings.HasPrefix(tool.Name, "math.") {
					t.Errorf("search_tools found %s for a token of tools:math", tool.Name)
				}
			}
			if res := call(t, cs, "tools_info", map[string]any{"names": []string{"catalog.get"}}); !res.IsError {
				t.Errorf("tools_info described catalog.get: %s", text(res))
			}
			res = call(t, cs, "call_tool_chain", map[string]any{"code": `codemode.CallTool("catalog.get", {"id": "p03"})`})
			if run := structuredAs[chainResult](t, res); !res.IsError || run.Error == nil || run.Error.Reason != "unknown-reference" {
				t.Errorf("call_tool_chain of catalog.get: %s, want unknown-reference", text(res))
			}
			if _, err := callErr(cs, "catalog.get", map[string]any{"id": "p03"}); err == nil {
				t.Error("the gateway called catalog.get for a token of tools:math")
			}
			if res := call(t, cs, "math.add", map[string]any{"a": 1, "b": 2}); res.IsError {
				t.Errorf("math.add: %s", text(res))
			}
		})
	}
}

// A run's "did you mean" names only tools the token sees: math.get,
// under tools:math, is not told of catalog.get.
func TestChainSuggestsOnlyWhatItSees(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Verify: verifier})
	cs := connect(t, url, "2026-07-28", tokenMath)
	res := call(t, cs, "call_tool_chain", map[string]any{"code": `codemode.CallTool("math.get", {})`})
	if !res.IsError || strings.Contains(text(res), "catalog") {
		t.Errorf("%s: want an error that names no catalog tool", text(res))
	}
}
