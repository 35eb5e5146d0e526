package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/exprd/exprd/internal/schemafast"
	"github.com/exprd/exprd/model"
)

// compiledTool is a Tool checked at the start of a turn.
type compiledTool struct {
	Tool
	schema  *jsonschema.Schema // nil: any object
	simple  *schemafast.Schema // nil: not of the simple shape
	timeout time.Duration
	desc    model.Tool
}

var schemaSeq atomic.Uint64

// SchemaCacheSize bounds the compiled parameter schemas kept across turns:
// a turn's tools are mostly the same as the last turn's, and compiling a
// schema costs more than the rest of a step. When full, it starts over.
const SchemaCacheSize = 256

var schemas = struct {
	sync.Mutex
	m map[string]*jsonschema.Schema
}{m: map[string]*jsonschema.Schema{}}

// compileSchema compiles a tool's parameters, or finds them compiled.
// Compiled schemas are immutable and safe to share.
func compileSchema(doc []byte) (*jsonschema.Schema, error) {
	schemas.Lock()
	s, ok := schemas.m[string(doc)]
	schemas.Unlock()
	if ok {
		return s, nil
	}
	s, err := compileSchemaDoc(doc)
	if err != nil {
		return nil, err
	}
	schemas.Lock()
	if len(schemas.m) >= SchemaCacheSize {
		clear(schemas.m)
	}
	schemas.m[string(doc)] = s
	schemas.Unlock()
	return s, nil
}

// compileSchemaDoc compiles a schema. Schemas are never fetched: a $ref
// must stay inside the document.
func compileSchemaDoc(doc []byte) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	url := fmt.Sprintf("mem:///agent/%d.json", schemaSeq.Add(1))
	if err := c.AddResource(url, v); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %v", err)
	}
	return s, nil
}

type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schemas are not fetched (%s)", url)
}

// checkArguments decodes a call's arguments and validates them against the
// tool's schema. Its error is what the model is told.
func (t *compiledTool) checkArguments(args json.RawMessage) error {
	var obj map[string]any
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		if _, err := model.NormalizeArguments(string(args)); err != nil {
			return err
		}
		obj = nil // an object encoding/json cannot hold (1e400): the validator reads it
	}
	if t.schema == nil || (obj != nil && t.simple != nil && t.simple.Accepts(obj)) {
		return nil
	}
	// The validator decides, and words its errors; it reads numbers exactly.
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return &model.ArgumentsError{Reason: "are not valid JSON"}
	}
	if err := t.schema.Validate(v); err != nil {
		return fmt.Errorf("tool call arguments do not match the tool's parameters: %s", schemaMessage(err))
	}
	return nil
}

// schemaMessage renders a validation error as "at /path: what" parts from
// the leaves of its tree of causes, the form a model reads best.
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
		parts = append(parts, "at /"+strings.Join(e.InstanceLocation, "/")+": "+e.ErrorKind.LocalizedString(printer))
	}
	walk(ve)
	return strings.Join(parts, "; ")
}

var printer = message.NewPrinter(language.English)
