package evaluator

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var schemaSeq atomic.Uint64

// compileSchema compiles a JSON Schema (draft 2020-12 unless it says
// otherwise). what names it in errors.
func compileSchema(what string, doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %v", what, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Schemas are never fetched: a $ref must stay inside the document.
	c.UseLoader(refusingLoader{})
	url := fmt.Sprintf("mem:///%d.json", schemaSeq.Add(1))
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid JSON Schema: %v", what, err)
	}
	return s, nil
}

type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schemas are not fetched (%s)", url)
}

// schemaMessage renders a validation error as "at /path: what" lines joined
// with "; ", from the leaves of its tree of causes (the real errors, also
// under a $ref), the form a model reads best.
func schemaMessage(err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		loc := "/" + strings.Join(e.InstanceLocation, "/")
		parts = append(parts, "at "+loc+": "+e.ErrorKind.LocalizedString(printer))
	}
	walk(ve)
	return strings.Join(parts, "; ")
}

var printer = message.NewPrinter(language.English)

// validInput reports whether v satisfies InputSchema(read, maxSteps) without
// the general validator, which costs more than a small call's whole run.
// When it says no, the schema validator runs and explains; a fuzz test keeps
// the two in agreement.
func validInput(v any, read bool, maxSteps int) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	_, hasSteps := obj["steps"]
	_, hasRead := obj["read"]
	if !hasSteps && !(read && hasRead) {
		return false
	}
	for k, x := range obj {
		switch k {
		case "steps":
			steps, ok := x.([]any)
			if !ok || len(steps) > maxSteps {
				return false
			}
			for _, s := range steps {
				if !validStep(s) {
					return false
				}
			}
		case "read":
			if s, ok := x.(string); !read || !ok || s == "" {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func validStep(v any) bool {
	step, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if _, ok := step["expr"]; !ok {
		return false
	}
	for k, x := range step {
		s, ok := x.(string)
		switch {
		case !ok:
			return false
		case k == "set":
		case k == "expr" || k == "confirm":
			if s == "" {
				return false
			}
		default:
			return false
		}
	}
	return true
}
