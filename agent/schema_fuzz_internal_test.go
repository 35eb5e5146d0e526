package agent

import (
	"bytes"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fuzzSchemas are parameter schemas of the shapes the argument check's
// fast path takes, and one it leaves to the validator.
var fuzzSchemas = []string{
	`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
	`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`,
	`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}},"on":{"type":"boolean"},"n":{"type":"integer","minimum":0}}}`,
	`{"type":"object","properties":{"q":{"type":"string","minLength":2,"maxLength":5,"enum":["ab","abc","x"]}}}`,
	`{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}]}`,
}

// FuzzCheckArguments: the model's tool-call arguments. The check's fast
// path may only take a shortcut the validator agrees with: an object it
// accepts, the full validator accepts too, and one the validator refuses
// is refused.
func FuzzCheckArguments(f *testing.F) {
	for i, args := range []string{
		`{"city":"Paris"}`, `{"a":1,"b":2}`, `{"a":1,"b":2.5}`, `{"a":1,"b":2,"c":3}`,
		`{"tags":["x",1]}`, `{"n":-1}`, `{"n":1e400}`, `{"q":"abc"}`, `{"q":"abcdef"}`,
		`{"a":1}`, `{"a":1,"b":1}`, `{"city":null}`, `[]`, `null`, `{"b":9007199254740993}`,
	} {
		f.Add(uint8(i), []byte(args))
	}
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		doc := fuzzSchemas[int(which)%len(fuzzSchemas)]
		cs, err := compileSchemaDoc([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		tool := &compiledTool{compiledSchema: cs}
		got := tool.checkArguments(args)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
		if err != nil {
			if got == nil {
				t.Fatalf("%s: arguments %q that are not JSON were accepted", doc, args)
			}
			return
		}
		if _, isObject := v.(map[string]any); !isObject {
			if got == nil {
				t.Fatalf("%s: arguments %q that are not an object were accepted", doc, args)
			}
			return
		}
		want := cs.schema.Validate(v)
		if (got == nil) != (want == nil) {
			t.Fatalf("%s: arguments %q: the check says %v, the validator %v", doc, args, got, want)
		}
	})
}
