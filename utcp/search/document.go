package search

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp"
)

// Fields of a tool, and their weights in the ranking.
const (
	fieldName = iota
	fieldManual
	fieldTags
	fieldDesc
	fieldParams
	fieldParamDesc // what the input schema says of its properties
	fieldPath      // an HTTP tool's URL path, without its parameters
	numFields
)

var fieldWeights = [numFields]float64{
	fieldName:      3.0,
	fieldManual:    1.5,
	fieldTags:      2.0,
	fieldDesc:      1.0,
	fieldParams:    0.7,
	fieldParamDesc: 0.3,
	fieldPath:      1.0,
}

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// Weights of query terms that were not typed but derived.
	synonymWeight = 0.5
	// minPrefix is the shortest shared prefix that makes two terms related.
	minPrefix = 5
	// exactNameBoost is added when the query is a tool's name.
	exactNameBoost = 100
)

// prefixWeight weighs a query's terms that share a long prefix with a
// typed or synonym term (a variable so that the evaluation can leave
// prefix matching out).
var prefixWeight = 0.6

// searchDoc is one tool analysed for ranking. It is built once, when the
// tool is registered, and shared by every index that holds the tool.
type searchDoc struct {
	tool *manual.Tool
	// name and short are the tool's full and short names, lower-cased,
	// for the exact-name boost.
	name, short string
	tf          map[string][numFields]float64 // each term's count in each field
	len         [numFields]float64            // terms in each field
}

func analyzeTool(t *manual.Tool) *searchDoc {
	short := strings.TrimPrefix(t.Name, t.ManualName()+".")
	d := &searchDoc{tool: t, name: strings.ToLower(t.Name), short: strings.ToLower(short), tf: map[string][numFields]float64{}}
	names, descs := schemaText(t.Inputs)
	texts := [numFields][]string{
		fieldName:      {short},
		fieldManual:    {t.ManualName()},
		fieldTags:      t.Tags,
		fieldDesc:      append([]string{t.Title, t.Description}, hintWords(t.Annotations)...),
		fieldParams:    names,
		fieldParamDesc: descs,
		fieldPath:      urlPathWords(t.Template),
	}
	for f, parts := range texts {
		for _, p := range parts {
			for _, term := range analyze(p) {
				tfs := d.tf[term]
				tfs[f]++
				d.tf[term] = tfs
				d.len[f]++
			}
		}
	}
	return d
}

// hintWords are what an MCP tool's annotations say of it, as words a
// query may use ("read only", "destructive"): the hints set true, and the
// annotations' title.
func hintWords(a *manual.ToolAnnotations) []string {
	if a == nil {
		return nil
	}
	words := []string{a.Title}
	for _, h := range []struct {
		set  *bool
		word string
	}{{a.ReadOnlyHint, "read-only"}, {a.DestructiveHint, "destructive"}, {a.IdempotentHint, "idempotent"}} {
		if h.set != nil && *h.set {
			words = append(words, h.word)
		}
	}
	return words
}

// maxSchemaTextProps bounds the properties a tool's input schema adds to
// its search document.
const maxSchemaTextProps = 256

// schemaTextDepth is how deep in its input schema a tool's properties are
// read for search (0: the top level only; a variable so that the
// evaluation can measure what the levels below add).
var schemaTextDepth = 3

// schemaText is the property names of an input schema and what their
// descriptions say, down to schemaTextDepth levels (a request body's
// fields are a level down), following $refs into the schema's own $defs.
func schemaText(raw []byte) (names, descs []string) {
	var doc map[string]any
	if json.Unmarshal(raw, &doc) != nil {
		return nil, nil
	}
	defs, _ := doc["$defs"].(map[string]any)
	seen := map[string]bool{}
	var walk func(node any, depth int)
	walk = func(node any, depth int) {
		m, _ := node.(map[string]any)
		if m == nil || depth > schemaTextDepth || len(names) >= maxSchemaTextProps {
			return
		}
		if ref, ok := m["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/$defs/")
			if !seen[name] {
				seen[name] = true
				walk(defs[name], depth)
			}
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			list, _ := m[k].([]any)
			for _, e := range list {
				walk(e, depth)
			}
		}
		walk(m["items"], depth)
		props, _ := m["properties"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if len(names) >= maxSchemaTextProps {
				return
			}
			names = append(names, k)
			p, _ := props[k].(map[string]any)
			if d, ok := p["description"].(string); ok {
				descs = append(descs, firstSentences(d, 300))
			}
			walk(p, depth+1)
		}
	}
	walk(doc, 0)
	return names, descs
}

// firstSentences is text cut to at most n bytes, at a word's end.
func firstSentences(text string, n int) string { return utcp.CutWords(text, n) }

// urlPathWords is the words of an HTTP template's URL path, without its
// {parameters}, version segments (v1, 2010-04-01) and extensions (.json).
func urlPathWords(t *manual.CallTemplate) []string {
	if t == nil {
		return nil
	}
	u := t.StringField("url")
	if u == "" {
		return nil
	}
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		if j := strings.IndexByte(u, '/'); j >= 0 {
			u = u[j:]
		} else {
			return nil
		}
	}
	var out []string
	for _, seg := range strings.Split(u, "/") {
		seg = strings.TrimSuffix(seg, ".json")
		if seg == "" || strings.HasPrefix(seg, "{") || strings.HasPrefix(seg, "${") || isVersion(seg) {
			continue
		}
		out = append(out, seg)
	}
	return out
}

// isVersion reports whether a path segment is an API version: v1, v2beta,
// 2010-04-01.
func isVersion(seg string) bool {
	if len(seg) >= 2 && seg[0] == 'v' && seg[1] >= '0' && seg[1] <= '9' {
		return true
	}
	return strings.Trim(seg, "0123456789-") == ""
}
