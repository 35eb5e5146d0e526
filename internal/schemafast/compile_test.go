package schemafast_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/exprd/exprd/internal/schemafast"
)

const metaschema = "not a valid JSON Schema: not valid against the metaschema: "

// TestCompileErrors: a refused schema's error is one line, without the
// compiler's internal locations.
func TestCompileErrors(t *testing.T) {
	t.Parallel()
	const invalid = "not a valid JSON Schema: "
	tests := []struct{ name, doc, want string }{
		{"valid", `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
		{"an older draft", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, ""},
		{"a bad type", `{"type":5}`, metaschema + "at /type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'; at /type: got number, want array"},
		{"a bad pattern", `{"pattern":"("}`, metaschema + "at /pattern: '(' is not valid regex: error parsing regexp: missing closing ): `(`"},
		{"a remote $ref", `{"$ref":"https://example.com/x.json"}`, invalid + `failing loading "https://example.com/x.json": schemas are not fetched (https://example.com/x.json)`},
		{"a relative $ref", `{"$ref":"other.json"}`, invalid + `failing loading "other.json": schemas are not fetched (other.json)`},
		{"a dangling pointer", `{"$ref":"#/$defs/nope"}`, invalid + `json-pointer in "/$defs/nope" not found`},
		{"a remote metaschema", `{"$schema":"https://example.com/meta"}`, invalid + `failing loading "https://example.com/meta": schemas are not fetched (https://example.com/meta)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := schemafast.Compile([]byte(tc.doc))
			var got string
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	if _, err := schemafast.Compile([]byte(`{"type":`)); err == nil || !strings.HasPrefix(err.Error(), "not valid JSON: ") {
		t.Errorf("not JSON: got %v, want not valid JSON: …", err)
	}
}

// TestCompileErrorsBounded: at most MaxSchemaProblems of the metaschema's
// complaints, in the order the compiler finds them (it varies).
func TestCompileErrorsBounded(t *testing.T) {
	t.Parallel()
	all := []string{
		"at /type: value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'",
		"at /type: got number, want array",
		"at /required: items at 0 and 1 are equal",
		"at /minLength: minimum: got -1, want 0",
	}
	_, err := schemafast.Compile([]byte(`{"type":5,"required":["a","a"],"minLength":-1}`))
	msg, ok := strings.CutPrefix(err.Error(), metaschema)
	if !ok {
		t.Fatalf("got %q, want %q…", err, metaschema)
	}
	checkSubset(t, strings.Split(msg, "; "), all, schemafast.MaxSchemaProblems)
}

// TestProblems: a validation error's leaves, all of them or limit; Message
// joins them all.
func TestProblems(t *testing.T) {
	t.Parallel()
	s, err := schemafast.Compile([]byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"$ref":"#/$defs/n"}},"required":["c"],"$defs":{"n":{"type":"number"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	verr := s.Validate(map[string]any{"a": 1.0, "b": "x"})
	all := []string{"at /: missing property 'c'", "at /a: got number, want string", "at /b: got string, want number"}
	for _, tc := range []struct{ limit, want int }{{0, 3}, {3, 3}, {8, 3}, {2, 2}, {1, 1}} {
		checkSubset(t, schemafast.Problems(verr, tc.limit), all, tc.want)
	}
	checkSubset(t, strings.Split(schemafast.Message(verr), "; "), all, len(all))
}

// checkSubset fails unless got is n distinct elements of all.
func checkSubset(t *testing.T, got, all []string, n int) {
	t.Helper()
	if len(got) != n || len(slices.Compact(slices.Sorted(slices.Values(got)))) != n {
		t.Errorf("got %q, want %d distinct of %q", got, n, all)
	}
	for _, g := range got {
		if !slices.Contains(all, g) {
			t.Errorf("got %q, not one of %q", g, all)
		}
	}
}
