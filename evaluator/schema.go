package evaluator

import (
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/exprd/exprd/internal/schemafast"
)

// compileSchema compiles a JSON Schema (draft 2020-12 unless it says
// otherwise) that fetches nothing. what names it in errors.
func compileSchema(what string, doc []byte) (*jsonschema.Schema, error) {
	sch, err := schemafast.Compile(doc)
	if err != nil {
		return nil, fmt.Errorf("%s is %v", what, err)
	}
	return sch, nil
}

// schemaMessage renders a validation error for the model.
func schemaMessage(err error) string { return schemafast.Message(err) }

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
