package mcpserve_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// wideRegistry is a registry of n tools whose descriptions are each of
// desc bytes, as a provider with long descriptions gives them: one
// gateway page of them is a long answer.
func wideRegistry(t testing.TB, n, desc int) *utcp.Registry {
	t.Helper()
	reg := demoRegistry(t)
	var tools []string
	for i := range n {
		tools = append(tools, fmt.Sprintf(`{"name":"t%03d","description":%q,"inputs":{"type":"object"},
			"tool_call_template":{"call_template_type":"http","http_method":"POST","url":"http://127.0.0.1:1/t"}}`, i, strings.Repeat("w", desc)))
	}
	manual := `{"utcp_version":"1.0.1","manual_version":"1.0.0","tools":[` + strings.Join(tools, ",") + `]}`
	if _, err := reg.Register(context.Background(), "wide", utcp.FromText(manual).AllowProtocols("http")); err != nil {
		t.Fatal(err)
	}
	return reg
}

// A client that stops reading its answer has the request ended once
// WriteTimeout has passed from the answer's first byte: its place in
// flight and what the memory budget holds for it are given back. A
// client that reads is answered in full.
func TestWriteTimeout(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	mem := membudget.New(1<<30, 10*time.Millisecond)
	url, _ := serve(t, mcpserve.Config{Registry: wideRegistry(t, 100, 128<<10), Expose: mcpserve.ExposeTools, Memory: mem,
		Limits: mcpserve.Limits{MaxInFlight: 1, WriteTimeout: timeout}})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

	// One that reads: the whole page (over 12 MB).
	resp := post(t, url, "", list)
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK || len(body) < 12_000_000 || !strings.HasSuffix(strings.TrimSpace(body), "}") {
		t.Fatalf("a client that reads: %d, %d bytes", resp.StatusCode, len(body))
	}

	// One that never reads, on a socket with a small receive buffer.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	host := strings.TrimPrefix(strings.TrimSuffix(url, mcpserve.Path), "http://")
	// It reads its status line only: a 503 (the one place in flight was
	// the reading client's, not yet given back) is sent again.
	for attempt := 0; ; attempt++ {
		conn, err := d.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
			"Mcp-Protocol-Version: 2025-06-18\r\nContent-Length: %d\r\n\r\n%s", mcpserve.Path, host, len(list), list)
		status := make([]byte, len("HTTP/1.1 200"))
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(conn, status); err != nil {
			t.Fatalf("the status line: %v", err)
		}
		if string(status) == "HTTP/1.1 200" {
			break
		}
		if attempt == 5 {
			t.Fatalf("the client that never reads was answered %q", status)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// While it is held, the one place in flight is taken; once the
	// timeout has passed it is free again.
	ping := func() int {
		resp := post(t, url, "", `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		readAll(t, resp)
		return resp.StatusCode
	}
	for start := time.Now(); ping() != http.StatusServiceUnavailable; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the request of the client that never reads was never in flight")
		}
	}
	held := time.Now()
	for ping() != http.StatusOK {
		if time.Since(held) > 10*timeout {
			t.Fatalf("the request of a client that never reads still holds its place after %v", time.Since(held))
		}
		time.Sleep(timeout / 10)
	}
	deadline := time.Now().Add(5 * time.Second)
	for mem.InUse() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := mem.InUse(); n != 0 {
		t.Errorf("%d bytes still reserved for the client that never reads", n)
	}
}

// Each tools/call of a JSON-RPC batch (2025-03-26) takes a place in
// flight: a batch of MaxInFlight calls runs, one more and a call is
// refused with a JSON-RPC error, never run.
func TestBatchInFlight(t *testing.T) {
	t.Parallel()
	const limit = 3
	tests := []struct {
		name    string
		calls   int
		refused int
	}{
		{"at the limit", limit, 0},
		{"one past it", limit + 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := demoRegistry(t)
			slow := withSlow(t, reg)
			url, _ := serve(t, mcpserve.Config{Registry: reg, Limits: mcpserve.Limits{MaxInFlight: limit}})
			var msgs []string
			for i := range tt.calls {
				msgs = append(msgs, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"call_tool_chain",`+
					`"arguments":{"code":"codemode.CallTool(\"slow.wait\", {})"}}}`, i+1))
			}
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("["+strings.Join(msgs, ",")+"]"))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-03-26")
			got := make(chan string, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					got <- err.Error()
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				got <- string(b)
			}()
			for range tt.calls - tt.refused {
				<-slow.arrived
			}
			select {
			case <-slow.arrived:
				t.Error("a call past the limit ran")
			case <-time.After(200 * time.Millisecond):
			}
			slow.free()
			body := <-got
			if n := strings.Count(body, "max_in_flight"); n != tt.refused {
				t.Errorf("%d calls refused, want %d: %s", n, tt.refused, body)
			}
			if n := strings.Count(body, `\"ok\":true`); n != tt.calls-tt.refused {
				t.Errorf("%d calls answered, want %d: %s", n, tt.calls-tt.refused, body)
			}
		})
	}
}

// A gateway call's arguments are reserved from the memory budget,
// argsFactor (48) times their bytes, before they are decoded: at what the
// budget holds with the body's reservation the call is made (and fails
// on the provider's schema), one byte more and it is refused.
func TestGatewayArgumentsBudget(t *testing.T) {
	t.Parallel()
	const argsFactor, bodyFactor = 48, 2
	body := func(n int) (string, int) {
		args := `{"a":"` + strings.Repeat("x", n-len(`{"a":""}`)) + `"}`
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"math.add","arguments":` + args + `}}`, len(args)
	}
	const n = 100_000
	b, l := body(n)
	need := int64(bodyFactor*len(b) + argsFactor*l)
	limit := need
	for limit-limit/16 != need { // the large reservations' part of the budget
		limit++
	}
	mem := membudget.New(limit, 10*time.Millisecond)
	url, _ := serve(t, mcpserve.Config{Registry: demoRegistry(t), Expose: mcpserve.ExposeTools, Memory: mem})
	tests := []struct {
		name    string
		size    int
		refused bool
	}{
		{"at what the budget holds", n, false},
		{"one byte past it", n + 1, true},
	}
	for _, tt := range tests {
		b, _ := body(tt.size)
		got := readAll(t, post(t, url, "", b))
		if refused := strings.Contains(got, "memory_budget"); refused != tt.refused || !strings.Contains(got, `"isError":true`) {
			t.Errorf("%s: %.300s", tt.name, got)
		}
	}
	if mem.InUse() != 0 {
		t.Errorf("%d bytes still reserved", mem.InUse())
	}
}

// MaxInFlightPerCaller requests of one token are served at once; its next
// is refused 503 at once, while another token's is served.
func TestInFlightPerCaller(t *testing.T) {
	t.Parallel()
	reg := demoRegistry(t)
	slow := withSlow(t, reg)
	const limit = 2
	url, _ := serve(t, mcpserve.Config{Registry: reg, Verify: verifier, Limits: mcpserve.Limits{MaxInFlight: 8, MaxInFlightPerCaller: limit}})
	cs := connect(t, url, "2025-11-25", tokenAll)
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
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if resp := post(t, url, tokenAll, list); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(readAll(t, resp), "max_in_flight_per_caller") {
		t.Errorf("the same token one past its limit: %d, want 503 naming max_in_flight_per_caller", resp.StatusCode)
	}
	if resp := post(t, url, tokenMCP, list); resp.StatusCode != http.StatusOK {
		t.Errorf("another token meanwhile: %s, want served", status(t, resp))
	}
	slow.free()
	wg.Wait()
	if resp := post(t, url, tokenAll, list); resp.StatusCode != http.StatusOK {
		t.Errorf("the token after its calls ended: %s", status(t, resp))
	}
}
