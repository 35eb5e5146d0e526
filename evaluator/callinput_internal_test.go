package evaluator

import (
	"reflect"
	"testing"
)

// decodeCallFast must agree with the general path: whenever it accepts an
// input, the general path accepts it too and decodes the same call.
func FuzzDecodeCallFast(f *testing.F) {
	for _, s := range []string{
		`{"steps": [{"set": "scopes.root.a", "expr": "1", "confirm": "ok?"}]}`,
		`{"steps": [{"expr": "1"}], "read": "scopes.root"}`, `{"read": "1"}`, `{"steps": []}`,
		`{"steps": [{"expr": "\"a\\n\\u00e9\" + \"\u00e9\""}]}`, ` { "steps" : [ { "expr" : "1" } ] } `,
		`{"steps": [{"expr": "1", "expr": "2"}]}`, `{"steps": [], "steps": []}`,
		`{"steps": [{"expr": ""}]}`, `{"steps": [{"expr": "1", "x": "y"}]}`, `{"read": ""}`,
		`{"steps": [{"set": 1, "expr": "1"}]}`, `{"steps": [{"expr": "1"}]} x`, `{}`, `[]`,
		`{"steps": [{"expr": "1"},{"expr": "1"},{"expr": "1"},{"expr": "1"}]}`, "{\"read\": \"\xff\"}",
		`{"steps": [{"expr": "1"},]}`, `{"steps": [{"expr": "1"}],}`, `{"steps": [{"expr": "1",}]}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, read bool) {
		const maxSteps = 3
		fast, ok := decodeCallFast(data, read, maxSteps)
		if !ok {
			return
		}
		tool, err := NewTool(Settings{Read: read}, Budgets{MaxSteps: maxSteps})
		if err != nil {
			t.Fatal(err)
		}
		slow, cerr := decodeCall(tool, data)
		if cerr != nil {
			t.Fatalf("the fast path accepted %q (read=%v), the general path refused: %v", data, read, cerr)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("input %q (read=%v): the fast path decoded %+v, the general path %+v", data, read, fast, slow)
		}
	})
}
