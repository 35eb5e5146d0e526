package evaluator

import (
	"testing"

	"github.com/exprd/exprd/evaluator/jsonvalue"
)

// validInput must agree with the input schema on every input.
func FuzzValidInput(f *testing.F) {
	for _, s := range []string{
		`{"steps": []}`, `{"steps": [{"expr": "1"}]}`, `{"steps": [{"expr": ""}]}`,
		`{"steps": [{"set": "scopes.root.a", "expr": "1", "confirm": "ok?"}]}`,
		`{"steps": [{"set": 1, "expr": "1"}]}`, `{"steps": [{"expr": "1", "x": 1}]}`,
		`{"steps": [{"expr": "1"}], "read": "1"}`, `{"read": "1"}`, `{"read": ""}`, `{}`,
		`{"steps": {}}`, `[]`, `{"steps": [1]}`, `{"steps": [{"expr": "1", "confirm": ""}]}`,
		`{"steps": [{"expr": "1"},{"expr": "1"},{"expr": "1"},{"expr": "1"}]}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, read bool) {
		v, err := jsonvalue.Decode(data)
		if err != nil {
			return
		}
		const maxSteps = 3
		schema, err := inputSchema(read, maxSteps)
		if err != nil {
			t.Fatal(err)
		}
		want := schema.Validate(v) == nil
		if got := validInput(v, read, maxSteps); got != want {
			t.Fatalf("validInput(%s, read=%v) = %v, the schema says %v", data, read, got, want)
		}
	})
}
