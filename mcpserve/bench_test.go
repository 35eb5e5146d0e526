package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/internal/testkit/benchpair"
	"github.com/exprd/exprd/mcpserve"
	"github.com/exprd/exprd/server"
)

const chain3 = `let r1 = codemode.CallTool("math.add", {"a": 5, "b": 7});
let r2 = codemode.CallTool("math.multiply", {"a": r1.result, "b": 3});
codemode.CallTool("math.subtract", {"a": r2.result, "b": 6})`

// A chain of three calls to the math provider on loopback: over MCP's
// call_tool_chain (a go-sdk client at 2026-07-28), and over gRPC's
// CodeMode.Execute, on the same registry; "interleaved" runs one of each
// an iteration (internal/benchpair) and reports their ratio, the one to
// judge by (-count 10 and benchstat's interval). "interleaved-http" does
// the same with a plain HTTP client instead of the go-sdk's: the
// endpoint's share without the SDK client's.
func BenchmarkChainOfThree(b *testing.B) {
	reg := demoRegistry(b)
	url, _ := serve(b, mcpserve.Config{Registry: reg})
	cs := connect(b, url, "2026-07-28", "")
	viaMCP := func(b *testing.B) {
		if res := call(b, cs, "call_tool_chain", map[string]any{"code": chain3}); res.IsError {
			b.Fatal(text(res))
		}
	}
	b.Run("mcp", func(b *testing.B) {
		for b.Loop() {
			viaMCP(b)
		}
	})
	srv, err := server.New(server.WithRegistry(reg), server.WithLogger(quiet), server.WithRateLimit(1e9, 1e9)) // the benchmark is one caller past 1,000 a second
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	b.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	cm := exprdv1.NewCodeModeClient(conn)
	viaGRPC := func(b *testing.B) {
		resp, err := cm.Execute(context.Background(), &exprdv1.ExecuteRequest{Code: chain3, Tools: []string{"math.add", "math.multiply", "math.subtract"}})
		if err != nil || resp.GetError() != nil {
			b.Fatal(err, resp.GetError())
		}
	}
	b.Run("grpc", func(b *testing.B) {
		for b.Loop() {
			viaGRPC(b)
		}
	})
	b.Run("interleaved", func(b *testing.B) { benchpair.Interleave(b, viaMCP, viaGRPC) })
	// The endpoint's own share: the same call by a plain HTTP client, one
	// POST of the 2026-07-28 revision's JSON-RPC and one read of its
	// answer, against gRPC's client and server.
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": "call_tool_chain", "arguments": map[string]any{"code": chain3},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}})
	viaHTTP := func(b *testing.B) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "call_tool_chain")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"value":{"result":30}`)) {
			b.Fatalf("%d %s %v", resp.StatusCode, out, err)
		}
	}
	b.Run("http", func(b *testing.B) {
		for b.Loop() {
			viaHTTP(b)
		}
	})
	b.Run("interleaved-http", func(b *testing.B) { benchpair.Interleave(b, viaHTTP, viaGRPC) })
}
