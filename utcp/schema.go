package utcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MaxArgumentProblems bounds the problems an InvalidArgumentsError lists.
const MaxArgumentProblems = 8

// schemaLocation names every tool schema for the compiler; each schema gets
// its own compiler, so they never clash.
const schemaLocation = "mem:///utcp/schema.json"

var printer = message.NewPrinter(language.English)

// compileSchema compiles a tool's JSON Schema, draft 2020-12 unless the
// schema's $schema says otherwise. References may only point inside the
// schema: no file is read and no URL fetched.
func compileSchema(doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(schemaLocation, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(schemaLocation)
	if err != nil {
		return nil, errors.New(cleanSchemaError(err))
	}
	return sch, nil
}

// maxSchemaProblems bounds what a refused schema's error lists.
const maxSchemaProblems = 3

// cleanSchemaError says on one line what is wrong with a schema: the
// metaschema's failing keywords, or the compiler's complaint without its
// internal location.
func cleanSchemaError(err error) string {
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		probs := validationProblems(sve.Err)
		if len(probs) > maxSchemaProblems {
			probs = probs[:maxSchemaProblems]
		}
		return "not valid against the metaschema: " + strings.Join(probs, "; ")
	}
	msg := err.Error()
	msg = strings.ReplaceAll(msg, schemaLocation, "")
	msg = strings.ReplaceAll(msg, "\"#", "\"")
	msg, _, _ = strings.Cut(msg, "\n")
	return msg
}

// validateAgainst checks args against a compiled input schema.
func validateAgainst(sch *jsonschema.Schema, tool string, args map[string]any) error {
	if sch == nil {
		return nil
	}
	var v any = args
	if args == nil {
		v = map[string]any{}
	} else if !isJSONValue(args) {
		norm, err := normalizeJSON(args)
		if err != nil {
			return &InvalidArgumentsError{Tool: tool, Problems: []string{"arguments are not JSON: " + err.Error()}}
		}
		v = norm
	}
	err := sch.Validate(v)
	if err == nil {
		return nil
	}
	return &InvalidArgumentsError{Tool: tool, Problems: validationProblems(err)}
}

func validationProblems(err error) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(out) >= MaxArgumentProblems {
			return
		}
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			out = append(out, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(out) == 0 {
		out = append(out, ve.ErrorKind.LocalizedString(printer))
	}
	return out
}

// isJSONValue reports whether v holds only what encoding/json decodes to
// (plus Go's numeric kinds, finite), which the validator takes as is.
func isJSONValue(v any) bool {
	switch x := v.(type) {
	case nil, bool, string, json.Number, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case float32:
		return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0)
	case []any:
		for _, e := range x {
			if !isJSONValue(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !isJSONValue(e) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

// normalizeJSON round-trips v through JSON, so typed slices, maps and
// structs become []any and map[string]any.
func normalizeJSON(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeJSON(raw)
}

// simpleSchema is a fast path for the most common tool schema: an object of
// typed properties, some required, maybe closed. It only ever accepts what
// the compiled schema accepts; anything it is unsure of goes to the
// validator, which also words the errors.
type simpleSchema struct {
	props      map[string]string // property → JSON type ("" for any)
	required   []string
	additional bool
}

// annotations are keywords that never change whether a value is valid.
var annotations = []string{"description", "title", "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly", "format"}

var simpleTypes = []string{"string", "number", "integer", "boolean", "object", "array", "null"}

// newSimpleSchema returns the fast path for doc, or nil when doc is not of
// that simple shape.
func newSimpleSchema(doc any) *simpleSchema {
	root, ok := doc.(map[string]any)
	if !ok || root["type"] != "object" {
		return nil
	}
	s := &simpleSchema{props: map[string]string{}, additional: true}
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
						if !ok || !slices.Contains(simpleTypes, t) {
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

// accepts reports whether args surely pass; false means "ask the validator".
func (s *simpleSchema) accepts(args map[string]any) bool {
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
