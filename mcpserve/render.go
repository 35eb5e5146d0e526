package mcpserve

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/exprd/exprd/utcp/manual"
)

// Bounds of search_tools' compact rendering.
const (
	// maxSummaryBytes cuts a description at a word's end.
	maxSummaryBytes = 240
	// maxEnumShown is how many values of an enum a signature shows.
	maxEnumShown = 6
)

// signature renders an input schema's top level compactly, TypeScript
// fashion: {a: number, b: number, note?: string}, required properties
// first, each in name order.
func signature(schema json.RawMessage) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return "{}"
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		ra, rb := slices.Contains(s.Required, a), slices.Contains(s.Required, b)
		switch {
		case ra && !rb:
			return -1
		case rb && !ra:
			return 1
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
		if !slices.Contains(s.Required, n) {
			b.WriteByte('?')
		}
		b.WriteString(": ")
		b.WriteString(typeOf(s.Properties[n], 0))
	}
	b.WriteByte('}')
	return b.String()
}

// typeOf is a property's type in a word: string, number, boolean, an
// enum's values, T[] for an array, object.
func typeOf(raw json.RawMessage, depth int) string {
	var p struct {
		Type  any               `json:"type"`
		Enum  []json.RawMessage `json:"enum"`
		Items json.RawMessage   `json:"items"`
		AnyOf []json.RawMessage `json:"anyOf"`
		OneOf []json.RawMessage `json:"oneOf"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return "any"
	}
	if len(p.Enum) > 0 {
		vals := make([]string, 0, min(len(p.Enum), maxEnumShown)+1)
		for i, v := range p.Enum {
			if i == maxEnumShown {
				vals = append(vals, "...")
				break
			}
			vals = append(vals, string(v))
		}
		return strings.Join(vals, "|")
	}
	var types []string
	switch t := p.Type.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				types = append(types, s)
			}
		}
	}
	if len(types) == 0 && depth < 2 {
		for _, alt := range append(p.AnyOf, p.OneOf...) {
			if t := typeOf(alt, depth+1); t != "any" && t != "null" {
				types = append(types, t)
			}
		}
	}
	for i, t := range types {
		switch t {
		case "integer":
			types[i] = "number"
		case "array":
			items := "any"
			if len(p.Items) > 0 && depth < 2 {
				items = typeOf(p.Items, depth+1)
			}
			if strings.Contains(items, "|") {
				items = "(" + items + ")"
			}
			types[i] = items + "[]"
		}
	}
	if len(types) == 0 {
		return "any"
	}
	return strings.Join(slices.Compact(types), "|")
}

// summary is a description's first paragraph, cut at a word's end
// within maxSummaryBytes.
func summary(desc string) string {
	desc = strings.TrimSpace(desc)
	if i := strings.Index(desc, "\n\n"); i >= 0 {
		desc = desc[:i]
	}
	desc = strings.Join(strings.Fields(desc), " ")
	if len(desc) <= maxSummaryBytes {
		return desc
	}
	cut := desc[:maxSummaryBytes]
	for !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	if i := strings.LastIndexByte(cut, ' '); i > maxSummaryBytes/2 {
		cut = cut[:i]
	}
	return cut + "…"
}

// objectSchema is the schema as MCP wants a tool's: an object's. An
// empty one is {"type": "object"}; another type is nil (none given).
func objectSchema(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{"type":"object"}`)
	}
	var s struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &s) != nil || s.Type != "object" {
		return nil
	}
	return raw
}

// mcpTool is a registry tool as MCP lists it.
func mcpTool(t *manual.Tool) *mcp.Tool {
	in := objectSchema(t.Inputs)
	if in == nil {
		in = json.RawMessage(`{"type":"object"}`)
	}
	out := &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: in}
	if len(t.Outputs) > 0 {
		if o := objectSchema(t.Outputs); o != nil {
			out.OutputSchema = o
		}
	}
	if a := t.Annotations; a != nil {
		out.Annotations = &mcp.ToolAnnotations{Title: a.Title, DestructiveHint: a.DestructiveHint, OpenWorldHint: a.OpenWorldHint,
			ReadOnlyHint: a.ReadOnlyHint != nil && *a.ReadOnlyHint, IdempotentHint: a.IdempotentHint != nil && *a.IdempotentHint}
	}
	return out
}

// toolSize is about what a tool's listing takes, for the memory budget.
func toolSize(t *manual.Tool) int64 {
	return int64(len(t.Name) + len(t.Title) + len(t.Description) + len(t.Inputs) + len(t.Outputs) + 64)
}
