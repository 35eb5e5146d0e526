package mcptransport_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exprd/exprd/internal/testkit/mcpeverything"
	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/mcptransport"
)

// The reference server's tools this package's tests rely on.
var everythingTools = []string{"echo", "get-structured-content", "get-sum", "get-tiny-image", "trigger-long-running-operation"}

func TestEverythingServer(t *testing.T) {
	t.Parallel()
	url := mcpeverything.StartHTTP(t)
	sse := mcpeverything.StartSSE(t)
	stdio := mcpeverything.StdioManual(t, "stdio")
	for _, tc := range []struct {
		name     string
		register func(*utcp.Registry) error
	}{
		{"streamable HTTP", func(reg *utcp.Registry) error {
			_, err := reg.Register(context.Background(), "ev", utcp.FromTemplate(mcpeverything.HTTPManual("http", url)))
			return err
		}},
		{"HTTP+SSE (2024-11-05)", func(reg *utcp.Registry) error {
			_, err := reg.Register(context.Background(), "ev", utcp.FromTemplate(mcpeverything.SSEManual("sse", sse)))
			return err
		}},
		{"stdio from a manuals dir", func(reg *utcp.Registry) error {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "ev.json"), stdio, 0o644); err != nil {
				return err
			}
			_, err := reg.LoadDir(context.Background(), dir)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg, _ := newRegistry(t)
			if err := tc.register(reg); err != nil {
				t.Fatal(err)
			}
			reg2, _ := reg.Manual("ev")
			prefix := reg2.Tools[0][:strings.LastIndex(reg2.Tools[0], ".")+1]
			for _, name := range everythingTools {
				if !slices.Contains(reg2.Tools, prefix+name) {
					t.Errorf("%s not registered; got %v", prefix+name, reg2.Tools)
				}
			}
			ctx := context.Background()
			if v, err := reg.Call(ctx, prefix+"echo", map[string]any{"message": "hi"}); err != nil || v != "Echo: hi" {
				t.Errorf("echo: %v, %v", v, err)
			}
			v, err := reg.Call(ctx, prefix+"get-structured-content", map[string]any{"location": "Chicago"})
			if want := map[string]any{"temperature": 36.0, "conditions": "Light rain / drizzle", "humidity": 82.0}; err != nil || !reflect.DeepEqual(v, want) {
				t.Errorf("structured: %#v, %v", v, err)
			}
			tool, _ := reg.Tool(prefix + "get-structured-content")
			if tool.Title == "" || tool.Annotations == nil || tool.Annotations.ReadOnlyHint == nil || !*tool.Annotations.ReadOnlyHint {
				t.Errorf("title %q annotations %+v", tool.Title, tool.Annotations)
			}
			img, err := reg.Call(ctx, prefix+"get-tiny-image", nil)
			if items, _ := img.([]any); err != nil || !slices.ContainsFunc(items, func(x any) bool {
				m, _ := x.(map[string]any)
				return m["type"] == "image" && m["mime_type"] == "image/png"
			}) {
				t.Errorf("image: %v, %v", img, err)
			}
			// Progress as stream chunks.
			st, err := reg.CallStream(ctx, prefix+"trigger-long-running-operation", map[string]any{"duration": 0.6, "steps": 3})
			if err != nil {
				t.Fatal(err)
			}
			var progress int
			var last any
			for {
				c, err := st.Next()
				if err != nil {
					if err.Error() != "EOF" {
						t.Fatal(err)
					}
					break
				}
				if m, ok := c.(map[string]any); ok && m["progress"] != nil {
					progress++
				}
				last = c
			}
			if progress == 0 || !strings.Contains(last.(string), "Long running operation completed") {
				t.Errorf("stream: %d progress chunks, last %v", progress, last)
			}
			// A cancelled call, then the session still serves.
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err = reg.Call(cctx, prefix+"trigger-long-running-operation", map[string]any{"duration": 30, "steps": 2})
			cancel()
			if !errors.Is(err, utcp.ErrTimeout) {
				t.Errorf("cancelled: got %v, want a timeout", err)
			}
			if v, err := reg.Call(ctx, prefix+"get-sum", map[string]any{"a": 2, "b": 3}); err != nil || !strings.Contains(v.(string), "5") {
				t.Errorf("get-sum after the cancelled call: %v, %v", v, err)
			}
			// An error result (isError: true), and an embedded resource.
			if _, err := reg.Call(ctx, prefix+"get-resource-reference", map[string]any{"resourceId": 0}); reason(err) != mcptransport.ReasonToolError {
				t.Errorf("error result: got %v, want tool-error", err)
			}
			res, err := reg.Call(ctx, prefix+"get-resource-reference", map[string]any{"resourceId": 1})
			if items, _ := res.([]any); err != nil || !slices.ContainsFunc(items, func(x any) bool {
				m, _ := x.(map[string]any)
				return m["type"] == "resource" && m["uri"] != ""
			}) {
				t.Errorf("resource: %v, %v", res, err)
			}
			// exprd advertises elicitation (but over HTTP+SSE, the
			// 2024-11-05 revision's, which has none), so the server lists
			// its tool that asks; called with no user to ask, it is
			// input-required.
			wantListed := tc.name != "HTTP+SSE (2024-11-05)"
			if listed := slices.Contains(reg2.Tools, prefix+"trigger-elicitation-request"); listed != wantListed {
				t.Errorf("the elicitation tool listed: %v, want %v", listed, wantListed)
			} else if listed {
				if _, err := reg.Call(ctx, prefix+"trigger-elicitation-request", nil); reason(err) != mcptransport.ReasonInputRequired {
					t.Errorf("elicitation with no user: got %v, want input-required", err)
				}
			}
		})
	}
}
