package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/exprd/exprd/internal/schemafast"
	"github.com/exprd/exprd/model"
)

// compiledTool is a Tool checked at the start of a turn.
type compiledTool struct {
	Tool
	*compiledSchema // nil: any object
	timeout         time.Duration
	desc            model.Tool
}

// compiledSchema is a tool's parameters compiled, with the fast path for
// their shape. It is immutable, and shared by the turns that declare the
// same parameters.
type compiledSchema struct {
	schema *jsonschema.Schema
	simple *schemafast.Schema // nil: not of the simple shape
}

// SchemaCacheSize bounds the compiled parameter schemas kept across turns:
// a turn's tools are mostly the same as the last turn's, and compiling a
// schema costs more than the rest of a step. The cache is an LRU keyed by
// the schema's SHA-256, so a client's bytes never become a key, and only
// schemas of at most MaxCachedSchemaBytes are kept: the cache holds at most
// SchemaCacheSize of them, whoever sends them.
const (
	SchemaCacheSize      = 256
	MaxCachedSchemaBytes = 64 << 10
)

var schemas = func() *lru.Cache[[sha256.Size]byte, *compiledSchema] {
	c, err := lru.New[[sha256.Size]byte, *compiledSchema](SchemaCacheSize)
	if err != nil {
		panic(err)
	}
	return c
}()

// compileSchema compiles a tool's parameters, or finds them compiled.
func compileSchema(doc []byte) (*compiledSchema, error) {
	if len(doc) > MaxCachedSchemaBytes {
		return compileSchemaDoc(doc)
	}
	key := sha256.Sum256(doc)
	if s, ok := schemas.Get(key); ok {
		return s, nil
	}
	s, err := compileSchemaDoc(doc)
	if err != nil {
		return nil, err
	}
	schemas.Add(key, s)
	return s, nil
}

// compileSchemaDoc compiles a tool's parameters: a JSON object, fetching
// nothing.
func compileSchemaDoc(doc []byte) (*compiledSchema, error) {
	var v any
	decoded := json.Unmarshal(doc, &v) == nil
	if _, ok := v.(map[string]any); decoded && !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	s, err := schemafast.Compile(doc)
	if err != nil {
		return nil, err
	}
	out := &compiledSchema{schema: s}
	if decoded {
		out.simple = schemafast.New(v)
	}
	return out, nil
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
	if t.compiledSchema == nil || (obj != nil && t.simple != nil && t.simple.Accepts(obj)) {
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

// schemaMessage renders a validation error for the model.
func schemaMessage(err error) string { return schemafast.Message(err) }
