package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/exprd/exprd/internal/turns"
	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp"
)

// schemaScope converts a document's OpenAPI schemas into JSON Schema
// 2020-12, once for the whole document: each local $ref target becomes one
// definition, converted once however many operations reach it, and a
// $ref to it becomes #/$defs/<name>. A tool's schema then carries in its
// $defs the definitions it reaches and no others (reach), so that what
// is built, and compiled, for a document is its operations' own schemas
// plus what each reaches, never every operation converting everything
// again.
//
// Definitions are converted from a queue, not by recursion through their
// references: a chain of a thousand references converts in a loop, each
// definition at its own depth. How deep a tool's schema nests through its
// references (the longest path, a cycle counted once) is each
// definition's height, computed once.
type schemaScope struct {
	ctx    context.Context
	root   any
	manual string
	names  map[string]int // ref → index in defs
	taken  map[string]bool
	defs   []*definition
	queue  []int // defs not yet converted
}

// definition is one $ref target, converted.
type definition struct {
	name   string
	target any
	// anchor is the definition a $recursiveRef "#" inside this one refers
	// to: this one when its target has $recursiveAnchor, else the one of
	// the definition that first referred to it ("" at a tool's root: "#").
	anchor string

	converted bool
	schema    any
	err       string   // why it cannot be converted ("": it can)
	refs      []defRef // the definitions it refers to, with where
	depth     int      // its own nesting, references not followed
	size      int      // its JSON's bytes
	height    int      // depth through its references; -1 until known
	state     uint8    // while computing heights: 0 new, 1 on the path, 2 done
}

// defRef is a reference to defs[def] from a schema, at nesting depth.
type defRef struct {
	def, depth int
}

// converted is one of a tool's schemas (an input part, the body, the
// output), converted: its JSON value, the definitions it refers to, and
// how deep it nests on its own.
type converted struct {
	schema any
	refs   []defRef
	depth  int
}

func newSchemaScope(ctx context.Context, root any, manual string) *schemaScope {
	return &schemaScope{ctx: ctx, root: root, manual: manual, names: map[string]int{}, taken: map[string]bool{}}
}

// convert converts a tool's schema (nil: {}) and every definition it
// reaches that is not converted yet. where names it in errors.
func (s *schemaScope) convert(node any, where string) (*converted, error) {
	c := &converted{}
	if node == nil {
		c.schema = map[string]any{}
		return c, nil
	}
	w := walker{s: s, where: where}
	v, err := w.schema(node, 0)
	if err != nil {
		return nil, err
	}
	c.schema, c.refs, c.depth = v, w.refs, w.maxDepth
	if err := s.drain(); err != nil {
		return nil, err
	}
	return c, nil
}

// drain converts the queued definitions, each at its own depth 0.
func (s *schemaScope) drain() error {
	for len(s.queue) > 0 {
		if err := turns.Yield(s.ctx); err != nil {
			return err
		}
		i := s.queue[0]
		s.queue = s.queue[1:]
		d := s.defs[i]
		anchor := d.anchor
		if tm, _ := d.target.(map[string]any); tm != nil && tm["$recursiveAnchor"] == true {
			anchor = d.name
		}
		w := walker{s: s, anchor: anchor}
		v, err := w.schema(d.target, 0)
		d.converted, d.target = true, nil
		if err != nil {
			d.err = errMsg(err)
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			d.err = "cannot encode: " + err.Error()
			continue
		}
		d.schema, d.refs, d.depth, d.size, d.height = v, w.refs, w.maxDepth, len(raw), -1
	}
	return nil
}

// errMsg is a conversion error's message, without its path.
func errMsg(err error) string {
	if me, ok := err.(*manual.Error); ok {
		return me.Msg
	}
	return err.Error()
}

// reach collects into r the definitions a tool's schema reaches, through
// every reference. It fails, naming where, when one of them cannot be
// converted or the schema nests deeper than maxSchemaDepth through them.
func (s *schemaScope) reach(c *converted, r *reached, where string) error {
	if c.depth > maxSchemaDepth || c.height(s) > maxSchemaDepth {
		return &manual.Error{Manual: s.manual, Path: where, Msg: fmt.Sprintf("schema nested deeper than %d", maxSchemaDepth)}
	}
	stack := make([]int, 0, len(c.refs))
	for _, ref := range c.refs {
		stack = append(stack, ref.def)
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if r.has(i) {
			continue
		}
		d := s.defs[i]
		if d.err != "" {
			return &manual.Error{Manual: s.manual, Path: where, Msg: d.err}
		}
		r.add(i, d)
		for _, ref := range d.refs {
			if !r.has(ref.def) {
				stack = append(stack, ref.def)
			}
		}
	}
	return nil
}

// height is how deep c nests through its references.
func (c *converted) height(s *schemaScope) int {
	h := 0
	for _, ref := range c.refs {
		h = max(h, min(maxSchemaDepth+1, ref.depth+1+s.height(ref.def)))
	}
	return h
}

// height is how deep defs[i] nests through its references (at most
// maxSchemaDepth+1: deeper is too deep however much), memoised. A
// reference back to a definition on the path being measured (a cycle)
// adds nothing: it nests only as deep as what it validates. Iterative, so
// that a long chain of references costs no stack.
func (s *schemaScope) height(i int) int {
	if d := s.defs[i]; d.state == 2 || d.err != "" {
		return d.height
	}
	type frame struct{ def, next, h int }
	stack := []frame{{def: i, h: s.defs[i].depth}}
	s.defs[i].state = 1
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		d := s.defs[f.def]
		if f.next < len(d.refs) {
			ref := d.refs[f.next]
			f.next++
			t := s.defs[ref.def]
			switch {
			case t.err != "" || t.state == 1:
			case t.state == 2:
				f.h = max(f.h, min(maxSchemaDepth+1, ref.depth+1+t.height))
			default:
				t.state = 1
				stack = append(stack, frame{def: ref.def, h: t.depth})
			}
			continue
		}
		d.height, d.state = min(f.h, maxSchemaDepth+1), 2
		stack = stack[:len(stack)-1]
		if n := len(stack); n > 0 {
			p := &stack[n-1]
			ref := s.defs[p.def].refs[p.next-1]
			p.h = max(p.h, min(maxSchemaDepth+1, ref.depth+1+d.height))
		}
	}
	return s.defs[i].height
}

// reached is the set of definitions one tool schema carries.
type reached struct {
	seen map[int]bool
	list []int
	size int // the bytes of their JSON in $defs
}

func (r *reached) has(i int) bool { return r.seen[i] }

func (r *reached) add(i int, d *definition) {
	if r.seen == nil {
		r.seen = map[int]bool{}
		r.size = len(`,"$defs":{}`)
	}
	r.seen[i] = true
	r.list = append(r.list, i)
	r.size += len(d.name) + 4 + d.size // "name":{...},
}

// attach sets doc's $defs to the definitions r holds. The definitions
// are shared with every other tool that reaches them: read-only from here.
func (s *schemaScope) attach(doc map[string]any, r *reached) {
	if len(r.list) == 0 {
		return
	}
	defs := make(map[string]any, len(r.list))
	for _, i := range r.list {
		defs[s.defs[i].name] = s.defs[i].schema
	}
	doc["$defs"] = defs
}

// walker converts one schema (a tool's, or one definition) and collects
// the definitions it refers to.
type walker struct {
	s        *schemaScope
	where    string
	anchor   string // what $recursiveRef "#" refers to
	refs     []defRef
	maxDepth int
}

// schemaKeys hold one schema; schemaMaps a map of them; schemaLists a list.
var (
	schemaKeys  = []string{"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems"}
	schemaMaps  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaLists = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	// openAPIOnly keywords have no JSON Schema meaning and are dropped.
	openAPIOnly = []string{"discriminator", "xml", "externalDocs", "nullable", "example"}
)

func (w *walker) schema(node any, depth int) (any, error) {
	if depth > maxSchemaDepth {
		return nil, &manual.Error{Manual: w.s.manual, Path: w.where, Msg: fmt.Sprintf("schema nested deeper than %d", maxSchemaDepth)}
	}
	w.maxDepth = max(w.maxDepth, depth)
	m, ok := node.(map[string]any)
	if !ok {
		return node, nil
	}
	out := make(map[string]any, len(m))
	if ref, ok := m["$ref"].(string); ok {
		i, err := w.s.ref(ref, w.anchor, w.where)
		if err != nil {
			return nil, err
		}
		w.refs = append(w.refs, defRef{def: i, depth: depth})
		out["$ref"] = "#/$defs/" + w.s.defs[i].name
	}
	for k, v := range m {
		switch {
		case k == "$recursiveRef":
			// 2019-09's recursion, as OpenAPI 3.1 documents write it:
			// to the def whose $recursiveAnchor is innermost.
			out["$ref"] = "#"
			if w.anchor != "" && v == "#" {
				out["$ref"] = "#/$defs/" + w.anchor
			}
		case k == tupleItems:
			arr, _ := v.([]any)
			conv, err := w.list(arr, depth)
			if err != nil {
				return nil, err
			}
			out["prefixItems"] = conv
		case k == "$ref" || k == "$recursiveAnchor" || strings.HasPrefix(k, "x-") || slices.Contains(openAPIOnly, k):
		case slices.Contains(schemaKeys, k):
			if k == "items" {
				if arr, isArr := v.([]any); isArr { // draft-4 style tuple
					conv, err := w.list(arr, depth)
					if err != nil {
						return nil, err
					}
					out["prefixItems"] = conv
					continue
				}
			}
			conv, err := w.schema(v, depth+1)
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
				c, err := w.schema(pv, depth+1)
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
			conv, err := w.list(arr, depth)
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

func (w *walker) list(arr []any, depth int) ([]any, error) {
	out := make([]any, len(arr))
	for i, e := range arr {
		c, err := w.schema(e, depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// ref is the definition a local reference names, queued for conversion
// on first use; anchor is the $recursiveRef target where it is first met.
func (s *schemaScope) ref(ref, anchor, where string) (int, error) {
	if i, ok := s.names[ref]; ok {
		return i, nil
	}
	target, ok := resolvePointer(s.root, ref)
	if !ok {
		return 0, &manual.Error{Manual: s.manual, Path: where, Msg: fmt.Sprintf("$ref %q does not resolve inside the document", ref)}
	}
	base := ref[strings.LastIndex(ref, "/")+1:]
	if base == "" || base == "#" {
		base = "root"
	}
	base = utcp.SanitizeManualName(base)
	name := base
	for i := 2; s.taken[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	s.taken[name] = true
	i := len(s.defs)
	s.names[ref] = i
	s.defs = append(s.defs, &definition{name: name, target: target, anchor: anchor, height: -1})
	s.queue = append(s.queue, i)
	return i, nil
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
