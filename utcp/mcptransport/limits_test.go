package mcptransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/mcptransport"
)

// A stream's progress notifications: MaxProgressPerCall of them, and one
// past it; what a slow reader cannot hold is dropped, never the result.
func TestMaxProgressPerCall(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := startGoServer(t, false, nil, func(s *mcp.Server) {
		s.AddTool(&mcp.Tool{Name: "chatty", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var args struct{ N int }
				_ = json.Unmarshal(req.Params.Arguments, &args)
				for i := range args.N {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i)}); err != nil {
						return nil, err
					}
				}
				if args.N > mcptransport.MaxProgressPerCall {
					select { // a flood: it does not answer
					case <-ctx.Done():
					case <-release:
					}
					return nil, ctx.Err()
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
			})
	})
	t.Cleanup(func() { close(release) }) // before the server's Close
	reg, _ := newRegistry(t)
	register(t, reg, srv.URL)
	for _, n := range []int{mcptransport.MaxProgressPerCall, mcptransport.MaxProgressPerCall + 1} {
		st, err := reg.CallStream(context.Background(), "m.s.chatty", map[string]any{"n": n})
		if err != nil {
			t.Fatal(err)
		}
		var last any
		var chunks int
		for {
			c, err := st.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				last = err
				break
			}
			chunks++
			last = c
		}
		if n == mcptransport.MaxProgressPerCall {
			if last != "done" || chunks > mcptransport.MaxProgressPerCall+1 {
				t.Errorf("%d notifications: last %v after %d chunks, want done", n, last, chunks)
			}
			continue
		}
		if err, _ := last.(error); reason(err) != utcp.ReasonTooLarge {
			t.Errorf("%d notifications: last %v, want response-too-large", n, last)
		}
	}
}

// NotificationBurst messages unasked at once leave the session as it is.
func TestNotificationBurst(t *testing.T) {
	t.Parallel()
	srv := startGoServer(t, false, nil, func(s *mcp.Server) {
		s.AddTool(&mcp.Tool{Name: "burst", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				for i := range mcptransport.NotificationBurst - 10 {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: fmt.Sprint("not-ours-", i), Progress: 1})
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
			})
	})
	reg, _ := newRegistry(t)
	register(t, reg, srv.URL)
	if v, err := reg.Call(context.Background(), "m.s.burst", nil); err != nil || v != "done" {
		t.Errorf("got %v, %v; want done", v, err)
	}
}
