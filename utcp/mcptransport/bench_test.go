package mcptransport_test

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/internal/testkit/benchpair"
	"github.com/exprd/exprd/utcp"
)

// BenchmarkCall is a warm MCP tool call through the registry (arguments
// checked, the deadline and the memory reservation, the drift check, the
// answer bounded and converted) against the same call with a bare go-sdk
// client session, both to one go-sdk server on loopback, interleaved in
// each iteration: the "ratio" metric is the registry's time over the bare
// client's.
func BenchmarkCall(b *testing.B) {
	for _, stateless := range []bool{false, true} {
		name := map[bool]string{false: "sessions", true: "stateless"}[stateless]
		b.Run(name, func(b *testing.B) {
			srv := startGoServer(b, stateless, nil, func(s *mcp.Server) {
				textTool(s, "add", func(args map[string]any) string { return `{"result": 3}` })
			})
			reg, _ := newRegistry(b)
			if _, err := reg.Register(context.Background(), "m", utcp.FromTemplate(mcpManual(map[string]string{"s": srv.URL}))); err != nil {
				b.Fatal(err)
			}
			client := mcp.NewClient(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
			cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = cs.Close() })
			args := map[string]any{"a": 1, "b": 2}
			ctx := context.Background()
			viaRegistry := func(b *testing.B) {
				if _, err := reg.Call(ctx, "m.s.add", args); err != nil {
					b.Fatal(err)
				}
			}
			bare := func(b *testing.B) {
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: args}); err != nil {
					b.Fatal(err)
				}
			}
			viaRegistry(b)
			bare(b)
			b.Run("interleaved", func(b *testing.B) { benchpair.Interleave(b, viaRegistry, bare) })
		})
	}
}
