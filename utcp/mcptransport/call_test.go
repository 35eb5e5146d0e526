package mcptransport_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp"
)

func TestRegisterAndCall(t *testing.T) {
	t.Parallel()
	for _, stateless := range []bool{true, false} {
		t.Run(map[bool]string{true: "stateless 2026-07-28", false: "sessions 2025-11-25"}[stateless], func(t *testing.T) {
			t.Parallel()
			srv := startGoServer(t, stateless, nil, func(s *mcp.Server) {
				textTool(s, "hello", func(args map[string]any) string { return "hi " + args["who"].(string) })
				textTool(s, "json", func(map[string]any) string { return `{"a": 1}` })
			})
			reg, _ := newRegistry(t)
			got, err := reg.Register(context.Background(), "m", utcp.FromTemplate(mcpManual(map[string]string{"srv": srv.URL})))
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"m.srv.hello", "m.srv.json"}; !reflect.DeepEqual(got.Tools, want) {
				t.Fatalf("tools: got %v, want %v", got.Tools, want)
			}
			v, err := reg.Call(context.Background(), "m.srv.hello", map[string]any{"who": "you"})
			if err != nil || v != "hi you" {
				t.Fatalf("hello: got %v, %v; want hi you", v, err)
			}
			v, err = reg.Call(context.Background(), "m.srv.json", nil)
			if err != nil || !reflect.DeepEqual(v, map[string]any{"a": 1.0}) {
				t.Fatalf("json: got %#v, %v", v, err)
			}
		})
	}
}
