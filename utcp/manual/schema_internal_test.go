package manual

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/exprd/exprd/internal/schemafast"
)

// TestSimpleSchemaNeverAcceptsWhatTheValidatorRefuses checks the fast path
// against the validator for every type and a spread of values.
func TestSimpleSchemaNeverAcceptsWhatTheValidatorRefuses(t *testing.T) {
	t.Parallel()
	values := []any{nil, true, false, "s", "", 1.0, 1.5, math.Copysign(0, -1), 1e300, int(2), int64(-3), uint8(4), float32(2.5),
		json.Number("3"), json.Number("3.0"), json.Number("1e2"), json.Number("99999999999999999999"),
		map[string]any{}, map[string]any{"a": 1.0}, []any{}, []any{1.0}, math.NaN(), math.Inf(1)}
	for _, typ := range append([]string{""}, schemafast.Types...) {
		for _, closed := range []bool{false, true} {
			prop := map[string]any{"description": "p"}
			if typ != "" {
				prop["type"] = typ
			}
			doc := map[string]any{"type": "object", "properties": map[string]any{"p": prop}, "required": []any{"p"}, "additionalProperties": !closed}
			fast := schemafast.New(doc)
			if fast == nil {
				t.Fatalf("type %q: no fast path for a simple schema", typ)
			}
			sch, err := CompileSchema(doc)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range values {
				for _, args := range []map[string]any{{"p": v}, {"p": v, "extra": 1.0}, {}} {
					if isJSONValue(args) && fast.Accepts(args) && sch.Validate(map[string]any(args)) != nil {
						t.Errorf("type %q closed=%v args %#v: fast path accepts, validator refuses", typ, closed, args)
					}
				}
			}
		}
	}
	for _, doc := range []any{
		map[string]any{"type": "object", "properties": map[string]any{"p": map[string]any{"type": "string", "minLength": 2.0}}},
		map[string]any{"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"},
		map[string]any{"type": "array"},
		map[string]any{"type": "object", "properties": map[string]any{"p": map[string]any{"type": []any{"string", "null"}}}},
	} {
		if schemafast.New(doc) != nil {
			t.Errorf("%v: got a fast path, want none", doc)
		}
	}
}
