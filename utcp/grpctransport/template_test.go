package grpctransport_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/manual"
)

// TestTemplateFields registers one tool per case of testdata/templates.json
// (its template over {"call_template_type": "grpc"}) and checks that a
// refused field is named by the error's path. Nothing is dialled: a
// template is checked when its manual is registered.
func TestTemplateFields(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/templates.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name     string         `json:"name"`
		Template map[string]any `json:"template"`
		Error    string         `json:"error"` // the refused field's path, "" when accepted
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			tmpl := map[string]any{"call_template_type": "grpc"}
			for k, v := range c.Template {
				tmpl[k] = v
			}
			doc := mustJSON(t, map[string]any{"utcp_version": "1.1.0", "tools": []any{map[string]any{"name": "t", "tool_call_template": tmpl}}})
			r := newRegistry(t)
			_, err := r.Register(context.Background(), "m", utcp.FromText(string(doc)).AllowProtocols("grpc"))
			if c.Error == "" {
				if err != nil {
					t.Fatalf("got %v, want the template accepted", err)
				}
				return
			}
			var me *manual.Error
			if !errors.As(err, &me) {
				t.Fatalf("got %v, want a *manual.Error", err)
			}
			if want := "tools[0].tool_call_template." + c.Error; me.Path != want {
				t.Errorf("got path %q (%v), want %q", me.Path, err, want)
			}
		})
	}
}

// A reflection template cannot register a manual: only UTCPService has
// GetManual.
func TestReflectionTemplateDoesNotDiscover(t *testing.T) {
	t.Parallel()
	r := newRegistry(t)
	tmpl := `{"call_template_type": "grpc", "service_name": "grpc.health.v1.Health", "method_name": "Check"}`
	_, err := r.Register(context.Background(), "h", utcp.FromTemplate(json.RawMessage(tmpl)))
	if !errors.Is(err, manual.ErrInvalid) {
		t.Errorf("got %v, want ErrInvalidManual", err)
	}
}
