package manual_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp/manual"
)

// manualWithInputs is a manual of one tool whose inputs are schema.
func manualWithInputs(t *testing.T, schema any) []byte {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"utcp_version": "1.0.1", "tools": []any{map[string]any{
		"name": "t", "inputs": schema, "tool_call_template": map[string]any{"call_template_type": "http", "url": "https://a.example/t"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// wide is an object schema of n subschemas: itself and n-1 properties.
func wide(n int) any {
	props := map[string]any{}
	for i := range n - 1 {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string"}
	}
	return map[string]any{"type": "object", "properties": props}
}

// deep is a schema whose deepest subschema is at depth d.
func deep(d int) any {
	var s any = map[string]any{"type": "string"}
	for range d {
		s = map[string]any{"type": "object", "properties": map[string]any{"v": s}}
	}
	return s
}

// TestSchemaBounds: a tool's schema of MaxSchemaNodes subschemas, or
// nested MaxSchemaDepth deep, compiles; one more is refused at
// registration, naming the bound, before the compiler (whose cost grows
// with the square of the subschemas and the cube of the nesting) sees it.
func TestSchemaBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		schema any
		want   string // "" to compile
	}{
		{"MaxSchemaNodes subschemas", wide(manual.MaxSchemaNodes), ""},
		{"one more", wide(manual.MaxSchemaNodes + 1), "more than 4096 subschemas (manual.MaxSchemaNodes)"},
		{"as many in $defs", map[string]any{"$defs": map[string]any{"a": wide(manual.MaxSchemaNodes)}}, "manual.MaxSchemaNodes"},
		{"nested MaxSchemaDepth deep", deep(manual.MaxSchemaDepth), ""},
		{"one deeper", deep(manual.MaxSchemaDepth + 1), "subschemas nested deeper than 64 (manual.MaxSchemaDepth)"},
		{"as deep in an allOf", map[string]any{"allOf": []any{deep(manual.MaxSchemaDepth)}}, "manual.MaxSchemaDepth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := manual.Parse(manualWithInputs(t, tc.schema))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want it compiled", err)
				}
				return
			}
			if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), "tools[0].inputs: invalid JSON Schema: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want the inputs refused for %q", err, tc.want)
			}
		})
	}
}

// TestConvertedSchemaNodes: a converted document's tools may hold
// MaxConvertedSchemaNodes subschemas between them; one more stops the
// reading there, before any more is compiled. (The tools here have a key
// a tool may not have, so that none costs compiling: each is skipped for
// it.)
func TestConvertedSchemaNodes(t *testing.T) {
	t.Parallel()
	document := func(total int) map[string]any {
		var tools []any
		for i := 0; total > 0; i++ {
			n := min(total, manual.MaxSchemaNodes)
			total -= n
			tools = append(tools, map[string]any{"name": fmt.Sprintf("t%d", i), "inputs": wide(n), "unknown": true,
				"tool_call_template": map[string]any{"call_template_type": "http", "url": "https://a.example/t"}})
		}
		return map[string]any{"tools": tools}
	}
	for _, tc := range []struct {
		name  string
		total int
		want  string
	}{
		{"at the limit", manual.MaxConvertedSchemaNodes, "none of the document's 49 operations could be converted"},
		{"one past it", manual.MaxConvertedSchemaNodes + 1, "more than 200000 subschemas between them (manual.MaxConvertedSchemaNodes); t48 and those after it were not read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := manual.ReadConverted(context.Background(), document(tc.total), "m")
			if !errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// A written manual's tools are bounded between them as a converted
// document's are: at the limit it parses, one past it is refused naming
// the bound, before any of its schemas is compiled.
func TestWrittenManualSchemaNodes(t *testing.T) {
	t.Parallel()
	written := func(total int) []byte {
		var tools []any
		for i := 0; total > 0; i++ {
			n := min(total, manual.MaxSchemaNodes)
			total -= n
			tools = append(tools, map[string]any{"name": fmt.Sprintf("t%d", i), "inputs": wide(n),
				"tool_call_template": map[string]any{"call_template_type": "http", "url": "https://a.example/t"}})
		}
		b, err := json.Marshal(map[string]any{"tools": tools})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		total int
		want  string
	}{
		{"at the limit", manual.MaxConvertedSchemaNodes, ""},
		{"one past it", manual.MaxConvertedSchemaNodes + 1, "tools[48].inputs: the manual's tools hold more than 200000 subschemas between them (manual.MaxConvertedSchemaNodes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := manual.Parse(written(tc.total))
			if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, manual.ErrInvalid) || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
