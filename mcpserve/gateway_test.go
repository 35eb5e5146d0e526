package mcpserve_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/exprd/exprd/mcpserve"
)

// Gateway mode lists the registry's tools page by page (the code-mode
// tools first with both), and calls each through the registry.
func TestGatewayListsEveryToolInPages(t *testing.T) {
	t.Parallel()
	reg := demoRegistry(t)
	var want []string
	for _, tool := range reg.List() {
		want = append(want, tool.Name)
	}
	tests := []struct {
		expose   mcpserve.Expose
		pageSize int
		want     []string
	}{
		{mcpserve.ExposeTools, 3, want},
		{mcpserve.ExposeTools, len(want), want},
		{mcpserve.ExposeTools, len(want) + 1, want},
		{mcpserve.ExposeBoth, 2, append([]string{"search_tools", "tools_info", "call_tool_chain"}, want...)},
		{mcpserve.ExposeBoth, 100, append([]string{"search_tools", "tools_info", "call_tool_chain"}, want...)},
		{mcpserve.ExposeCode, 1, []string{"search_tools", "tools_info", "call_tool_chain"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/page of %d", tt.expose, tt.pageSize), func(t *testing.T) {
			t.Parallel()
			url, _ := serve(t, mcpserve.Config{Registry: reg, Expose: tt.expose, Limits: mcpserve.Limits{PageSize: tt.pageSize}})
			for _, rev := range revisions {
				got, pages := listAll(t, connect(t, url, rev, ""))
				if !slices.Equal(got, tt.want) {
					t.Errorf("%s: listed %v, want %v", rev, got, tt.want)
				}
				if min := (len(tt.want) + tt.pageSize - 1) / tt.pageSize; pages < min || pages > min+1 {
					t.Errorf("%s: %d pages of %d, want %d", rev, pages, tt.pageSize, min)
				}
			}
		})
	}
}

func TestGatewayCalls(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Expose: mcpserve.ExposeTools})
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			t.Parallel()
			cs := connect(t, url, rev, "")
			res := call(t, cs, "math.add", map[string]any{"a": 2, "b": 3})
			if got := structuredAs[map[string]any](t, res); res.IsError || got["result"] != 5.0 {
				t.Errorf("math.add: %v (%s)", got, text(res))
			}
			res = call(t, cs, "catalog.get", map[string]any{"id": "p03"})
			if got := structuredAs[map[string]any](t, res); res.IsError || got["name"] != "Pen set" {
				t.Errorf("catalog.get over gRPC: %v (%s)", got, text(res))
			}
			tests := []struct {
				name string
				tool string
				args any
				want string
			}{
				{"the tool's arguments", "math.add", map[string]any{"a": "x"}, `tool "math.add" failed: tool "math.add": invalid arguments`},
				{"the provider's error", "math.divide", map[string]any{"a": 1, "b": 0}, `tool "math.divide" failed`},
				{"arguments not an object", "math.add", []int{1}, "the arguments must be an object"},
			}
			for _, tt := range tests {
				res := call(t, cs, tt.tool, tt.args)
				if !res.IsError || !strings.Contains(text(res), tt.want) {
					t.Errorf("%s: got %s, want a tool error saying %q", tt.name, text(res), tt.want)
				}
			}
			if _, err := callErr(cs, "math.power", map[string]any{}); err == nil || !strings.Contains(err.Error(), `unknown tool "math.power"`) {
				t.Errorf("an unknown tool: %v, want a JSON-RPC error", err)
			}
			// Code mode's tools are not there in gateway mode.
			if _, err := callErr(cs, "call_tool_chain", map[string]any{"code": "1"}); err == nil {
				t.Error("call_tool_chain answered in gateway mode")
			}
		})
	}
}

// A cursor exprd did not give is a JSON-RPC error (invalid params).
func TestGatewayBadCursor(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Expose: mcpserve.ExposeBoth})
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"bm90IG91cnM"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"%%%"}}`,
	} {
		resp := post(t, url, "", body)
		b := readAll(t, resp)
		if resp.StatusCode != 200 || !strings.Contains(b, `"code":-32602`) || !strings.Contains(b, "invalid cursor") {
			t.Errorf("%s: got %d %s, want invalid params", body, resp.StatusCode, b)
		}
	}
}

// A tools/list answer says how it may be cached, as 2026-07-28 wants:
// public with auth off, the caller's own (private) with auth on, where
// its scopes choose what it lists; and its resultType.
func TestListCacheScope(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		verify mcpserve.Verifier
		token  string
		want   string
	}{{nil, "", "public"}, {verifier, tokenMath, "private"}} {
		url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Expose: mcpserve.ExposeBoth, Verify: tc.verify})
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		resp.Body.Close()
		var got struct {
			Result struct {
				CacheScope string `json:"cacheScope"`
				ResultType string `json:"resultType"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(body), &got); err != nil || got.Result.CacheScope != tc.want || got.Result.ResultType != "complete" {
			t.Errorf("auth %v: %s, want cacheScope %q and resultType complete", tc.verify != nil, body, tc.want)
		}
	}
}
