package openapi

import (
	"fmt"
	"slices"
	"strings"

	"github.com/exprd/exprd/utcp"
)

// schemaScope converts OpenAPI schemas into one JSON Schema 2020-12
// document: local $refs become #/$defs/<name>, each target converted once.
type schemaScope struct {
	root   any
	manual string
	names  map[string]string // ref → def name
	defs   map[string]any
	// anchors are the defs being converted that carry a 2019-09
	// $recursiveAnchor, innermost last: a $recursiveRef "#" inside one
	// refers to it.
	anchors []string
}

func newSchemaScope(root any, manual string) *schemaScope {
	return &schemaScope{root: root, manual: manual, names: map[string]string{}, defs: map[string]any{}}
}

func (s *schemaScope) attach(doc map[string]any) {
	if len(s.defs) > 0 {
		doc["$defs"] = s.defs
	}
}

func (s *schemaScope) convert(node any, where string) (any, error) {
	if node == nil {
		return map[string]any{}, nil
	}
	return s.schema(node, where, 0)
}

// schemaKeys hold one schema; schemaMaps a map of them; schemaLists a list.
var (
	schemaKeys  = []string{"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems"}
	schemaMaps  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaLists = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	// openAPIOnly keywords have no JSON Schema meaning and are dropped.
	openAPIOnly = []string{"discriminator", "xml", "externalDocs", "nullable", "example"}
)

func (s *schemaScope) schema(node any, where string, depth int) (any, error) {
	if depth > maxSchemaDepth {
		return nil, &utcp.ManualError{Manual: s.manual, Path: where, Msg: fmt.Sprintf("schema nested deeper than %d", maxSchemaDepth)}
	}
	m, ok := node.(map[string]any)
	if !ok {
		return node, nil
	}
	out := make(map[string]any, len(m))
	if ref, ok := m["$ref"].(string); ok {
		name, err := s.ref(ref, where, depth)
		if err != nil {
			return nil, err
		}
		out["$ref"] = "#/$defs/" + name
	}
	for k, v := range m {
		switch {
		case k == "$recursiveRef":
			// 2019-09's recursion, as OpenAPI 3.1 documents write it:
			// to the def whose $recursiveAnchor is innermost.
			out["$ref"] = "#"
			if n := len(s.anchors); n > 0 && v == "#" {
				out["$ref"] = "#/$defs/" + s.anchors[n-1]
			}
		case k == tupleItems:
			arr, _ := v.([]any)
			conv, err := s.list(arr, where, depth)
			if err != nil {
				return nil, err
			}
			out["prefixItems"] = conv
		case k == "$ref" || k == "$recursiveAnchor" || strings.HasPrefix(k, "x-") || slices.Contains(openAPIOnly, k):
		case slices.Contains(schemaKeys, k):
			if k == "items" {
				if arr, isArr := v.([]any); isArr { // draft-4 style tuple
					conv, err := s.list(arr, where, depth)
					if err != nil {
						return nil, err
					}
					out["prefixItems"] = conv
					continue
				}
			}
			conv, err := s.schema(v, where, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = conv
		case slices.Contains(schemaMaps, k):
			mm, isMap := v.(map[string]any)
			if !isMap {
				out[k] = v
				continue
			}
			conv := make(map[string]any, len(mm))
			for pk, pv := range mm {
				c, err := s.schema(pv, where, depth+1)
				if err != nil {
					return nil, err
				}
				conv[pk] = c
			}
			if k == "definitions" {
				k = "$defs"
			}
			out[k] = conv
		case slices.Contains(schemaLists, k):
			arr, isArr := v.([]any)
			if !isArr {
				out[k] = v
				continue
			}
			conv, err := s.list(arr, where, depth)
			if err != nil {
				return nil, err
			}
			out[k] = conv
		default:
			out[k] = v
		}
	}
	// OpenAPI 3.0 forms of 2020-12 keywords.
	if ex, ok := m["example"]; ok {
		if _, has := out["examples"]; !has {
			out["examples"] = []any{ex}
		}
	}
	for _, pair := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		if b, ok := out[pair[0]].(bool); ok {
			delete(out, pair[0])
			if bound, has := out[pair[1]]; b && has {
				out[pair[0]] = bound
				delete(out, pair[1])
			}
		}
	}
	if n, _ := m["nullable"].(bool); n {
		switch t := out["type"].(type) {
		case string:
			out["type"] = []any{t, "null"}
		case []any:
			if !slices.Contains(t, any("null")) {
				out["type"] = append(slices.Clone(t), "null")
			}
		}
		if e, ok := out["enum"].([]any); ok && !slices.Contains(e, nil) {
			out["enum"] = append(slices.Clone(e), nil)
		}
	}
	return out, nil
}

func (s *schemaScope) list(arr []any, where string, depth int) ([]any, error) {
	out := make([]any, len(arr))
	for i, e := range arr {
		c, err := s.schema(e, where, depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// ref names a local reference's target in $defs, converting it on first use.
func (s *schemaScope) ref(ref, where string, depth int) (string, error) {
	if name, ok := s.names[ref]; ok {
		return name, nil
	}
	target, ok := resolvePointer(s.root, ref)
	if !ok {
		return "", &utcp.ManualError{Manual: s.manual, Path: where, Msg: fmt.Sprintf("$ref %q does not resolve inside the document", ref)}
	}
	base := ref[strings.LastIndex(ref, "/")+1:]
	if base == "" || base == "#" {
		base = "root"
	}
	base = utcp.SanitizeManualName(base)
	name := base
	for i := 2; ; i++ {
		if _, taken := s.defs[name]; !taken {
			break
		}
		name = fmt.Sprintf("%s_%d", base, i)
	}
	s.names[ref] = name
	s.defs[name] = true // reserves the name while the target converts (cycles)
	if tm, _ := target.(map[string]any); tm != nil && tm["$recursiveAnchor"] == true {
		s.anchors = append(s.anchors, name)
		defer func() { s.anchors = s.anchors[:len(s.anchors)-1] }()
	}
	conv, err := s.schema(target, where, depth+1)
	if err != nil {
		return "", err
	}
	s.defs[name] = conv
	return name, nil
}

// tupleItems holds a Swagger 2 schema's draft-4 tuple `items: [...]`
// while kin-openapi, which reads items as one schema, converts the
// document (tuplesAside); the conversion restores it as prefixItems.
const tupleItems = "x-exprd-tuple-items"

// tuplesAside moves every tuple `items` array of a decoded document to
// tupleItems, leaving `items` out.
func tuplesAside(v any, depth int) {
	if depth > maxSchemaDepth*4 {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if arr, ok := x["items"].([]any); ok {
			delete(x, "items")
			x[tupleItems] = arr
		}
		for _, e := range x {
			tuplesAside(e, depth+1)
		}
	case []any:
		for _, e := range x {
			tuplesAside(e, depth+1)
		}
	}
}
