package utcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
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
		{"MaxSchemaNodes subschemas", wide(utcp.MaxSchemaNodes), ""},
		{"one more", wide(utcp.MaxSchemaNodes + 1), "more than 4096 subschemas (utcp.MaxSchemaNodes)"},
		{"as many in $defs", map[string]any{"$defs": map[string]any{"a": wide(utcp.MaxSchemaNodes)}}, "utcp.MaxSchemaNodes"},
		{"nested MaxSchemaDepth deep", deep(utcp.MaxSchemaDepth), ""},
		{"one deeper", deep(utcp.MaxSchemaDepth + 1), "subschemas nested deeper than 64 (utcp.MaxSchemaDepth)"},
		{"as deep in an allOf", map[string]any{"allOf": []any{deep(utcp.MaxSchemaDepth)}}, "utcp.MaxSchemaDepth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := utcp.ParseManual(manualWithInputs(t, tc.schema))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want it compiled", err)
				}
				return
			}
			if !errors.Is(err, utcp.ErrInvalidManual) || !strings.Contains(err.Error(), "tools[0].inputs: invalid JSON Schema: ") || !strings.Contains(err.Error(), tc.want) {
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
	manual := func(total int) map[string]any {
		var tools []any
		for i := 0; total > 0; i++ {
			n := min(total, utcp.MaxSchemaNodes)
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
		{"at the limit", utcp.MaxConvertedSchemaNodes, "none of the document's 49 operations could be converted"},
		{"one past it", utcp.MaxConvertedSchemaNodes + 1, "more than 200000 subschemas between them (utcp.MaxConvertedSchemaNodes); t48 and those after it were not read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := utcp.ReadConverted(context.Background(), manual(tc.total), "m")
			if !errors.Is(err, utcp.ErrInvalidManual) || !strings.Contains(err.Error(), tc.want) {
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
	manual := func(total int) []byte {
		var tools []any
		for i := 0; total > 0; i++ {
			n := min(total, utcp.MaxSchemaNodes)
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
		{"at the limit", utcp.MaxConvertedSchemaNodes, ""},
		{"one past it", utcp.MaxConvertedSchemaNodes + 1, "tools[48].inputs: the manual's tools hold more than 200000 subschemas between them (utcp.MaxConvertedSchemaNodes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := utcp.ParseManual(manual(tc.total))
			if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, utcp.ErrInvalidManual) || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestYAMLKeysAreNotComparedPairwise: a YAML document is read without
// looking for duplicate keys (the YAML reader compares every key of a
// mapping with every other: 40,000 keys took 16 s); a key given twice
// keeps its last value, as in JSON, and only the first document is read.
func TestYAMLKeysAreNotComparedPairwise(t *testing.T) {
	t.Parallel()
	var wideYAML strings.Builder
	wideYAML.WriteString("k:\n")
	for i := range 20_000 {
		fmt.Fprintf(&wideYAML, "  p%d: %d\n", i, i)
	}
	for _, tc := range []struct {
		name, doc string
		want      string // the document as JSON
	}{
		{"a key twice", "a: 1\na: 2\n", `{"a":2}`},
		{"two documents", "a: 1\n---\nb: 2\n", `{"a":1}`},
		{"20,000 keys", wideYAML.String(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := utcp.DecodeDocument([]byte(tc.doc), "application/yaml", "")
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if n := len(v.(map[string]any)["k"].(map[string]any)); n != 20_000 {
					t.Errorf("got %d keys", n)
				}
				return
			}
			if raw, _ := json.Marshal(v); string(raw) != tc.want {
				t.Errorf("got %s, want %s", raw, tc.want)
			}
		})
	}
}
