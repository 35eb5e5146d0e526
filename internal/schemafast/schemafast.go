// Package schemafast holds the JSON Schema pieces the evaluator, the UTCP
// registry and the agent share: Compile (draft 2020-12, fetching nothing),
// Message (a validation error as a model reads it), and Schema, a fast path
// for the most common tool schema: an object of typed properties, some
// required, maybe closed. The fast path only ever accepts what the
// compiled schema accepts; anything it is unsure of goes to the validator,
// which also words the errors. utcp's test holds it to the validator for
// every type.
package schemafast

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// Schema is the fast path of one schema.
type Schema struct {
	props      map[string]string // property → JSON type ("" for any)
	required   []string
	additional bool
}

// annotations are keywords that never change whether a value is valid.
var annotations = []string{"description", "title", "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly", "format"}

// Types are the JSON types a simple property may have.
var Types = []string{"string", "number", "integer", "boolean", "object", "array", "null"}

// New returns the fast path for a decoded schema, or nil when it is not of
// the simple shape.
func New(doc any) *Schema {
	root, ok := doc.(map[string]any)
	if !ok || root["type"] != "object" {
		return nil
	}
	s := &Schema{props: map[string]string{}, additional: true}
	for k, v := range root {
		switch {
		case k == "type" || slices.Contains(annotations, k):
		case k == "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			for name, p := range props {
				pm, ok := p.(map[string]any)
				if !ok {
					return nil
				}
				typ := ""
				for pk, pv := range pm {
					switch {
					case pk == "type":
						t, ok := pv.(string)
						if !ok || !slices.Contains(Types, t) {
							return nil
						}
						typ = t
					case slices.Contains(annotations, pk):
					default:
						return nil
					}
				}
				s.props[name] = typ
			}
		case k == "required":
			list, ok := v.([]any)
			if !ok {
				return nil
			}
			for _, r := range list {
				name, ok := r.(string)
				if !ok {
					return nil
				}
				s.required = append(s.required, name)
			}
		case k == "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				return nil
			}
			s.additional = b
		default:
			return nil
		}
	}
	return s
}

// Accepts reports whether args surely pass; false means "ask the
// validator".
func (s *Schema) Accepts(args map[string]any) bool {
	for _, r := range s.required {
		if _, ok := args[r]; !ok {
			return false
		}
	}
	for k, v := range args {
		typ, known := s.props[k]
		if !known {
			if !s.additional {
				return false
			}
			continue
		}
		if typ != "" && !hasJSONType(v, typ) {
			return false
		}
	}
	return true
}

func hasJSONType(v any, typ string) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "number", "integer":
		var f float64
		switch x := v.(type) {
		case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
			return true
		case float64:
			f = x
		case float32:
			f = float64(x)
		case json.Number:
			if strings.ContainsAny(string(x), ".eE") {
				return false // precision matters here: leave it to the validator
			}
			_, err := x.Int64()
			return err == nil
		default:
			return false
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
		return typ == "number" || f == math.Trunc(f)
	}
	return false
}
