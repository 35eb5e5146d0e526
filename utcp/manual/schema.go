package manual

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/exprd/exprd/internal/schemafast"
)

// MaxArgumentProblems bounds the problems an InvalidArgumentsError lists.
const MaxArgumentProblems = 8

// Bounds on a tool's JSON Schema, checked before it is compiled: the
// compiler's cost grows faster than the schema. A manual's tools come from
// its provider, or from whoever registers it; the bounds hold for every
// manual, converted or not.
const (
	// MaxSchemaDepth bounds how deep subschemas nest in one schema (as
	// written: a $ref is not followed). The compiler checks a schema
	// against its metaschema in time that grows with the cube of its
	// nesting: 1,024 levels took 5 s, 4,096 five minutes. OpenAPI
	// conversion nests no deeper either, counting through references.
	MaxSchemaDepth = 64
	// MaxSchemaNodes bounds the subschemas of one schema (its $defs
	// included). The compiler finds each subschema it meets in a list
	// of those it has yet to compile, one by one, so a schema of n
	// subschemas costs n²: 4,096 of them take about 0.1 s. The largest
	// schema of the published documents in utcp/testdata/catalogs (one of
	// OpenAI's) has 1,768.
	MaxSchemaNodes = 4096
	// MaxConvertedSchemaNodes bounds the subschemas of a manual's tools
	// between them, a converted document's (ReadConverted) or a written
	// manual's, each tool's schemas bounded by MaxSchemaNodes: what
	// compiling them all may cost, about 5 s at worst. OpenAI's document
	// has 45,495.
	MaxConvertedSchemaNodes = 200_000
)

// CompileSchema compiles a tool's JSON Schema, draft 2020-12 unless the
// schema's $schema says otherwise. References may only point inside the
// schema: no file is read and no URL fetched. A schema past MaxSchemaDepth
// or MaxSchemaNodes is refused before it is compiled.
func CompileSchema(doc any) (*jsonschema.Schema, error) {
	if err := checkSchemaSize(doc); err != nil {
		return nil, err
	}
	return schemafast.CompileValue(doc)
}

// validateAgainst checks args against a compiled input schema.
func validateAgainst(sch *jsonschema.Schema, tool string, args map[string]any) error {
	if sch == nil {
		return nil
	}
	v, err := JSONArgs(tool, args)
	if err != nil {
		return err
	}
	if err := sch.Validate(v); err != nil {
		return &InvalidArgumentsError{Tool: tool, Problems: SchemaProblems(err)}
	}
	return nil
}

// JSONArgs is args as the validator and the transports read them: nil is
// {}, and typed slices, maps and structs become []any and
// map[string]any. Arguments that are not JSON (a NaN, a channel) are an
// *InvalidArgumentsError of tool.
func JSONArgs(tool string, args map[string]any) (map[string]any, error) {
	if args == nil {
		return map[string]any{}, nil
	}
	if isJSONValue(args) {
		return args, nil
	}
	norm, err := normalizeJSON(args)
	if err != nil {
		return nil, &InvalidArgumentsError{Tool: tool, Problems: []string{"arguments are not JSON: " + err.Error()}}
	}
	m, _ := norm.(map[string]any)
	return m, nil
}

// SchemaProblems are a validation error's problems, at most
// MaxArgumentProblems.
func SchemaProblems(err error) []string {
	return schemafast.Problems(err, MaxArgumentProblems)
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
	return DecodeJSON(raw)
}

// subschemaKeys are the keywords whose value is a schema, a list of
// schemas or a map of them, in any draft: what the compiler may compile.
var (
	subschemaKeys     = []string{"items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	subschemaListKeys = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	subschemaMapKeys  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)

// checkSchemaSize refuses a schema past MaxSchemaDepth or MaxSchemaNodes,
// counting every subschema as written (one the compiler would skip
// counts too), in time linear in what it counts.
func checkSchemaSize(doc any) error {
	_, err := schemaNodes(doc)
	return err
}

// schemaNodes counts doc's subschemas, as checkSchemaSize checks them.
func schemaNodes(doc any) (int, error) {
	type item struct {
		v     any
		depth int
	}
	stack := []item{{doc, 0}}
	nodes := 0
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		m, isMap := it.v.(map[string]any)
		if _, isBool := it.v.(bool); !isMap && !isBool {
			continue
		}
		if nodes++; nodes > MaxSchemaNodes {
			return 0, fmt.Errorf("more than %d subschemas (manual.MaxSchemaNodes)", MaxSchemaNodes)
		}
		if it.depth > MaxSchemaDepth {
			return 0, fmt.Errorf("subschemas nested deeper than %d (manual.MaxSchemaDepth)", MaxSchemaDepth)
		}
		for _, k := range subschemaKeys {
			if v, ok := m[k]; ok {
				stack = append(stack, item{v, it.depth + 1})
			}
		}
		for _, k := range subschemaListKeys {
			list, _ := m[k].([]any)
			for _, v := range list {
				stack = append(stack, item{v, it.depth + 1})
			}
		}
		for _, k := range subschemaMapKeys {
			mm, _ := m[k].(map[string]any)
			for _, v := range mm {
				stack = append(stack, item{v, it.depth + 1})
			}
		}
	}
	return nodes, nil
}
