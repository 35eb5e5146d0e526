package search

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

// searchLinear is search by scanning every document, as it was before the
// postings: the reference the postings must agree with.
func (ix *Index) searchLinear(query string, limit int) []utcp.SearchResult {
	terms, err := ix.queryTerms(query)
	if err != nil || len(terms) == 0 || len(ix.docs) == 0 {
		return nil
	}
	terms = ix.weighed(terms)
	q := strings.ToLower(strings.TrimSpace(query))
	var out []utcp.SearchResult
	for _, d := range ix.docs {
		score := 0.0
		for _, qt := range terms {
			if _, ok := d.tf[qt.term]; ok {
				score += ix.termScore(d, qt)
			}
		}
		if q != "" && (q == d.name || q == d.short) {
			score += exactNameBoost
		}
		if score > 0 {
			out = append(out, utcp.SearchResult{Tool: d.tool, Score: score})
		}
	}
	return ranked(out, limit)
}

// TestPostingsRankAsAScanDoes: on the published catalogues, every frozen
// request, every tool's name and a word of each description rank exactly
// as scanning every tool does: the same tools, in the same order, with the
// same scores.
func TestPostingsRankAsAScanDoes(t *testing.T) {
	reqs, _ := loadEvalRequests(t)
	for file, rs := range reqs.Catalogs {
		doc, err := os.ReadFile("../testdata/catalogs/" + file)
		if err != nil {
			t.Fatal(err)
		}
		reg, index := evalRegistry(t, doc)
		ix := index()
		var queries []string
		for _, r := range rs {
			queries = append(queries, TrimQuery(r.Request))
		}
		for _, tool := range reg.List() {
			queries = append(queries, tool.Name, strings.TrimPrefix(tool.Name, "api."))
			if w := strings.Fields(tool.Description); len(w) > 2 {
				queries = append(queries, w[len(w)/2]+" "+w[0])
			}
		}
		for _, q := range queries {
			got, err := ix.search(context.Background(), q, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := ix.searchLinear(q, 0)
			if len(got) != len(want) {
				t.Fatalf("%s: %q: %d results, want %d", file, q, len(got), len(want))
			}
			for i := range want {
				if got[i].Tool != want[i].Tool || got[i].Score != want[i].Score {
					t.Fatalf("%s: %q: result %d is %s %v, want %s %v", file, q, i, got[i].Tool.Name, got[i].Score, want[i].Tool.Name, want[i].Score)
				}
			}
		}
	}
}

// TestSchemaTextBound: a tool's input schema adds at most
// maxSchemaTextProps property names to its search document.
func TestSchemaTextBound(t *testing.T) {
	t.Parallel()
	for _, n := range []int{maxSchemaTextProps, maxSchemaTextProps + 1} {
		props := map[string]any{}
		for i := range n {
			props[fmt.Sprintf("p%03d", i)] = map[string]any{"type": "string", "description": "a field"}
		}
		raw, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
		names, descs := schemaText(raw)
		if len(names) != maxSchemaTextProps || len(descs) != maxSchemaTextProps {
			t.Errorf("%d properties: got %d names and %d descriptions, want %d", n, len(names), len(descs), maxSchemaTextProps)
		}
	}
}
