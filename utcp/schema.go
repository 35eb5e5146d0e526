package utcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
