package mcpserve_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/overload"
	"github.com/exprd/exprd/mcpserve"
	"github.com/exprd/exprd/membudget"
	"github.com/exprd/exprd/utcp"
)

// slowProvider is a tool provider on loopback whose one tool, slow.wait,
// answers once released (or when its caller goes).
type slowProvider struct {
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

func (p *slowProvider) free() { p.once.Do(func() { close(p.release) }) }

// withSlow registers slow.wait in reg.
func withSlow(t testing.TB, reg *utcp.Registry) *slowProvider {
	t.Helper()
	p := &slowProvider{arrived: make(chan struct{}, 64), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.arrived <- struct{}{}
		select {
		case <-p.release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(p.free)
	manual := fmt.Sprintf(`{"utcp_version":"1.0.1","manual_version":"1.0.0","tools":[{"name":"wait","description":"Waits until released.",
		"inputs":{"type":"object"},"tool_call_template":{"call_template_type":"http","http_method":"POST","url":%q}}]}`, srv.URL+"/wait")
	if _, err := reg.Register(context.Background(), "slow", utcp.FromText(manual).AllowProtocols("http")); err != nil {
		t.Fatal(err)
	}
	return p
}

func status(t testing.TB, resp *http.Response) string {
	t.Helper()
	return fmt.Sprintf("%d %s (Retry-After %q)", resp.StatusCode, strings.TrimSpace(readAll(t, resp)), resp.Header.Get("Retry-After"))
}

// A body of MaxBodyBytes is read; one byte more is 413, whether its
// length is announced or not.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	const limit = 4096
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Limits: mcpserve.Limits{MaxBodyBytes: limit}})
	tests := []struct {
		name    string
		size    int
		chunked bool
		want    int
	}{
		{"at the limit", limit, false, http.StatusOK},
		{"one past it", limit + 1, false, http.StatusRequestEntityTooLarge},
		{"at the limit, chunked", limit, true, http.StatusOK},
		{"one past it, chunked", limit + 1, true, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var body io.Reader = strings.NewReader(toolsListBody(tt.size))
			if tt.chunked {
				body = io.MultiReader(body) // no length known: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, url, body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("got %s, want %d", status(t, resp), tt.want)
			}
		})
	}
}

// MaxInFlight requests are served at once; the next is refused 503 at
// once, and served once one has ended.
func TestInFlightLimit(t *testing.T) {
	t.Parallel()
	reg := demoRegistry(t)
	slow := withSlow(t, reg)
	const limit = 2
	url, _ := serve(t, mcpserve.Config{Registry: reg, Limits: mcpserve.Limits{MaxInFlight: limit}})
	cs := connect(t, url, "2025-11-25", "")
	var wg sync.WaitGroup
	for range limit {
		wg.Go(func() {
			if res := call(t, cs, "call_tool_chain", map[string]any{"code": `codemode.CallTool("slow.wait", {})`}); res.IsError {
				t.Errorf("a call at the limit: %s", text(res))
			}
		})
	}
	for range limit {
		<-slow.arrived
	}
	resp := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("one past the limit: %s, want 503 with a Retry-After", status(t, resp))
	}
	slow.free()
	wg.Wait()
	if resp := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("after: %s", status(t, resp))
	}
}

// A body is reserved from the memory budget (twice its length) before
// it is read: at what the budget can hold it is served, one byte past
// it 503; and what a run builds counts against the same budget.
func TestMemoryBudget(t *testing.T) {
	t.Parallel()
	const budget = 1 << 20
	large := int64(budget - budget/16) // the most one reservation may hold
	mem := membudget.New(budget, 10*time.Millisecond)
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t, utcp.WithMemoryBudget(mem)), Memory: mem, Limits: mcpserve.Limits{MaxBodyBytes: budget}})
	tests := []struct {
		name string
		size int
		want int
	}{
		{"at what the budget holds", int(large / 2), http.StatusOK},
		{"one past it", int(large/2) + 1, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		resp := post(t, url, "", toolsListBody(tt.size))
		if resp.StatusCode != tt.want {
			t.Errorf("%s: got %s, want %d", tt.name, status(t, resp), tt.want)
		}
	}
	cs := connect(t, url, "2026-07-28", "")
	res := call(t, cs, "call_tool_chain", map[string]any{"code": `len(map(1..40, repeat("x", 90000)))`})
	if run := structuredAs[chainResult](t, res); !res.IsError || run.Error == nil || !strings.Contains(run.Error.Message, "memory budget") {
		t.Errorf("a run building 3.6 MB under a 1 MiB budget: %s", text(res))
	}
	if mem.InUse() != 0 {
		t.Errorf("%d bytes still reserved after the requests", mem.InUse())
	}
}

// Past the overload manager's refuse threshold every request is refused
// 503; at it, served. Past its shed threshold the request holding the
// most is cancelled, and its run says so.
func TestOverload(t *testing.T) {
	t.Parallel()
	reg := demoRegistry(t)
	slow := withSlow(t, reg)
	var heap atomic.Int64
	m, err := overload.New(overload.Config{Line: 1000, Refuse: 0.9, Shed: 0.95, Read: func() overload.Reading { return overload.Reading{Heap: heap.Load()} }, Collect: func() {}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := serve(t, mcpserve.Config{Registry: reg, Overload: m})
	cs := connect(t, url, "2025-06-18", "")
	for _, tt := range []struct {
		heap int64
		want int
	}{{900, http.StatusOK}, {901, http.StatusServiceUnavailable}, {0, http.StatusOK}} {
		heap.Store(tt.heap)
		m.Check()
		if resp := post(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != tt.want {
			t.Errorf("heap %d of a line of 1000: %s, want %d", tt.heap, status(t, resp), tt.want)
		}
	}
	done := make(chan *chainResult, 1)
	go func() {
		res := call(t, cs, "call_tool_chain", map[string]any{"code": `codemode.CallTool("slow.wait", {})`})
		r := structuredAs[chainResult](t, res)
		done <- &r
	}()
	<-slow.arrived
	heap.Store(960)
	m.Check()
	select {
	case r := <-done:
		if r.Error == nil || !strings.Contains(r.Error.Message, "exprd is overloaded") {
			t.Errorf("the shed run: %+v, want it to say exprd is overloaded", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run was not shed")
	}
}

// A tool that needs approval is never called over MCP: refused before
// the run when the source names it, and in gateway mode.
func TestApprovalRefused(t *testing.T) {
	t.Parallel()
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Expose: mcpserve.ExposeBoth, NeedsApproval: []string{"math.divide", "catalog.re*"}})
	cs := connect(t, url, "2026-07-28", "")
	for _, args := range []map[string]any{
		{"code": `codemode.CallTool("math.divide", {"a": 4, "b": 2})`},
		{"code": `codemode.CallToolStream("catalog.restock", {"id": "p01", "times": 1})`},
		{"code": `let r = codemode.CallTool("math.add", {"a": 1, "b": 2}); codemode.CallTool("math.divide", {"a": r.result, "b": 3})`},
	} {
		res := call(t, cs, "call_tool_chain", args)
		if !res.IsError || !strings.Contains(text(res), "needs a person's approval") || strings.Contains(text(res), `"trace"`) {
			t.Errorf("%s: %s, want refused before anything ran", args["code"], text(res))
		}
	}
	// A computed name can call only what the source names.
	res := call(t, cs, "call_tool_chain", map[string]any{"code": `let n = "math.div" + "ide"; codemode.CallTool("math.add", {"a": 1, "b": 2}); codemode.CallTool(n, {"a": 4, "b": 2})`})
	if run := structuredAs[chainResult](t, res); !res.IsError || run.Error == nil || run.Error.Reason != "unknown-reference" || len(run.Trace) != 1 {
		t.Errorf("a computed name of a tool that needs approval: %s", text(res))
	}
	if res := call(t, cs, "math.divide", map[string]any{"a": 4, "b": 2}); !res.IsError || !strings.Contains(text(res), "needs a person's approval") {
		t.Errorf("the gateway's math.divide: %s", text(res))
	}
	res = call(t, cs, "tools_info", map[string]any{"names": []string{"math.divide"}})
	if !strings.Contains(text(res), `"needs_approval":true`) {
		t.Errorf("tools_info does not say math.divide needs approval: %s", text(res))
	}
}
