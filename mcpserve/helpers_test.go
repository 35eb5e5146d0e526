package mcpserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/demo/providers"
	"github.com/exprd/exprd/internal/egress"
	"github.com/exprd/exprd/mcpserve"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/utcpall"
)

// quiet keeps what the tests start from logging.
var quiet = slog.New(slog.DiscardHandler)

// The revisions tested: the stateless one (server/discover) and two
// older ones (initialize).
var revisions = []string{"2026-07-28", "2025-11-25", "2025-06-18"}

// The tokens of the tests that turn auth on.
const (
	tokenAll   = "token-all-0000000001" // *
	tokenMCP   = "token-mcp-0000000002" // mcp
	tokenMath  = "token-math-000000003" // mcp, tools:math
	tokenNoMCP = "token-none-000000004" // codemode
)

func verifier(token string) (mcpserve.Caller, bool) {
	switch token {
	case tokenAll:
		return mcpserve.Caller{Name: "ops", Scopes: []string{"*"}}, true
	case tokenMCP:
		return mcpserve.Caller{Name: "host", Scopes: []string{"mcp"}}, true
	case tokenMath:
		return mcpserve.Caller{Name: "mathonly", Scopes: []string{"mcp", "tools:math"}}, true
	case tokenNoMCP:
		return mcpserve.Caller{Name: "grpc", Scopes: []string{"codemode"}}, true
	}
	return mcpserve.Caller{}, false
}

// demoRegistry is a registry with the demo's providers on loopback: math
// over HTTP, the catalogue over gRPC, and more (name to an inline UTCP
// manual).
func demoRegistry(t testing.TB, opts ...utcp.Option) *utcp.Registry {
	t.Helper()
	m, err := providers.StartMath()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cat, err := providers.StartCatalog()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cat.Close)
	reg, err := utcpall.New(append([]utcp.Option{utcp.WithEgress(egress.MustParse("loopback"))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	ctx := context.Background()
	if _, err := reg.Register(ctx, "math", utcp.FromURL(m.URL()+"/utcp")); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(cat.Addr(), ":")
	tmpl, _ := json.Marshal(map[string]any{"call_template_type": "grpc", "host": host, "port": port, "service_name": "grpcpb.UTCPService"})
	if _, err := reg.Register(ctx, "catalog", utcp.FromTemplate(tmpl)); err != nil {
		t.Fatal(err)
	}
	return reg
}

// serve serves cfg on a loopback port, as cmd/exprd does, and returns
// the endpoint's URL.
func serve(t testing.TB, cfg mcpserve.Config) (string, *mcpserve.Handler) {
	t.Helper()
	h, err := mcpserve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := mcpserve.NewHTTPServer(h, nil)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + lis.Addr().String() + mcpserve.Path, h
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect is a go-sdk client session of the endpoint at a revision, with
// a token when one is given.
func connect(t testing.TB, url, revision, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := dial(url, revision, token)
	if err != nil {
		t.Fatalf("connect (%s): %v", revision, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func dial(url, revision, token string) (*mcp.ClientSession, error) {
	return dialWith(url, revision, token, nil)
}

// dialWith is dial with the client's options.
func dialWith(url, revision, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearer{token: token, next: http.DefaultTransport}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "exprd-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: revision})
}

// call calls a tool and fails the test on a protocol error.
func call(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := callErr(cs, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func callErr(cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// text is a result's text content.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structuredAs decodes a result's structured content.
func structuredAs[T any](t testing.TB, res *mcp.CallToolResult) T {
	t.Helper()
	var v T
	raw, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(raw, &v)
	}
	if err != nil {
		t.Fatalf("structured content %v: %v", res.StructuredContent, err)
	}
	return v
}

// listAll lists every tool, page by page, and the pages' count.
func listAll(t testing.TB, cs *mcp.ClientSession) ([]string, int) {
	t.Helper()
	var names []string
	pages := 0
	cursor := ""
	for {
		res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if res.NextCursor == "" {
			return names, pages
		}
		if pages > 1000 {
			t.Fatal("the cursor never ends")
		}
		cursor = res.NextCursor
	}
}

// chainResult is call_tool_chain's structured content.
type chainResult struct {
	Value json.RawMessage `json:"value"`
	Trace []struct {
		Tool    string `json:"tool"`
		Outcome string `json:"outcome"`
		Error   string `json:"error"`
	} `json:"trace"`
	Error *struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"error"`
}

// post sends one raw JSON-RPC message to the endpoint, as a 2025-06-18
// client would after initialize.
func post(t testing.TB, url, token, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// toolsListBody is a tools/list request padded to n bytes.
func toolsListBody(n int) string {
	head := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"pad":"`
	tail := `"}}}`
	if n < len(head)+len(tail) {
		panic(fmt.Sprintf("a body of %d bytes is too short", n))
	}
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}
