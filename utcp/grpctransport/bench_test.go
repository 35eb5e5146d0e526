package grpctransport_test

import (
	"context"
	"encoding/json"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/exprd/exprd/gen/grpcpb"
	"github.com/exprd/exprd/internal/testkit/benchpair"
	"github.com/exprd/exprd/utcp"
)

// BenchmarkWarmCallTool compares a warm UTCPService CallTool through the
// registry (lookup, schema check, deadline, args to JSON, the shared
// connection, result_json decoded) with the generated stub on a connection
// of the same kind doing the same work (args to JSON, CallTool, result_json
// decoded), without a deadline ("bare") and under the registry's default
// deadline ("bare+deadline"). Goal: registry ≤ 1.1× bare+deadline, the
// same work; "interleaved" runs those two one after the other in each
// iteration and reports their ratio.
func BenchmarkWarmCallTool(b *testing.B) {
	s, p := startProvider(b)
	args := map[string]any{"a": 2.0, "b": 3.0}

	r := newRegistry(b)
	registerProvider(b, r, s, "calc", nil)
	viaRegistry := func(b *testing.B) {
		if _, err := r.Call(context.Background(), "calc.add", args); err != nil {
			b.Fatal(err)
		}
	}
	cc, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	client := grpcpb.NewUTCPServiceClient(cc)
	bare := func(deadline bool) func(b *testing.B) {
		return func(b *testing.B) {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if deadline {
				ctx, cancel = context.WithTimeout(ctx, utcp.DefaultTimeout)
			}
			defer cancel()
			payload, err := json.Marshal(args)
			if err != nil {
				b.Fatal(err)
			}
			resp, err := client.CallTool(ctx, &grpcpb.ToolCallRequest{Tool: "add", ArgsJson: string(payload)})
			if err != nil {
				b.Fatal(err)
			}
			var v any
			if err := json.Unmarshal([]byte(resp.GetResultJson()), &v); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, side := range []struct {
		name string
		call func(b *testing.B)
	}{{"registry", viaRegistry}, {"bare", bare(false)}, {"bare+deadline", bare(true)}} {
		b.Run(side.name, func(b *testing.B) {
			side.call(b) // warm
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				side.call(b)
			}
		})
	}
	b.Run("interleaved", func(b *testing.B) { benchpair.Interleave(b, viaRegistry, bare(true)) })
}
