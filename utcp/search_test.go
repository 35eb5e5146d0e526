package utcp_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/exprd/exprd/utcp"
)

// MinSearchHits is how many of the 30 queries must find their tool in the
// top 3.
const MinSearchHits = 28

// TestSearchCatalogue ranks the whole catalogue of testdata/catalog (40
// manuals, over 300 tools, near-duplicates across domains) for queries
// written as a user would ask them.
func TestSearchCatalogue(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, everyVariable)
	if _, err := r.LoadDir(context.Background(), "testdata/catalog"); err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	if n := len(r.List()); n < 300 {
		t.Fatalf("catalogue: got %d tools, want at least 300", n)
	}
	raw, err := os.ReadFile("testdata/search_queries.json")
	if err != nil {
		t.Fatal(err)
	}
	var queries []struct{ Query, Want string }
	if err := json.Unmarshal(raw, &queries); err != nil {
		t.Fatal(err)
	}
	if len(queries) != 30 {
		t.Fatalf("queries: got %d, want 30", len(queries))
	}
	hits := 0
	for _, q := range queries {
		res := r.Search(q.Query, 3)
		found := false
		var names []string
		for _, sr := range res {
			names = append(names, sr.Tool.Name)
			found = found || sr.Tool.Name == q.Want
		}
		if found {
			hits++
		} else {
			t.Logf("miss: %q: got %v, want %s", q.Query, names, q.Want)
		}
	}
	t.Logf("search: %d/%d queries have their tool in the top 3", hits, len(queries))
	if hits < MinSearchHits {
		t.Errorf("search: got %d/30 in the top 3, want at least %d", hits, MinSearchHits)
	}
}

// TestSearchHoldout reports (without tuning against it) how a second set of
// queries, written after the ranking was settled, fares.
func TestSearchHoldout(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, everyVariable)
	if _, err := r.LoadDir(context.Background(), "testdata/catalog"); err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	raw, err := os.ReadFile("testdata/search_queries_holdout.json")
	if err != nil {
		t.Fatal(err)
	}
	var queries []struct{ Query, Want string }
	if err := json.Unmarshal(raw, &queries); err != nil {
		t.Fatal(err)
	}
	hits := 0
	for _, q := range queries {
		var names []string
		for _, sr := range r.Search(q.Query, 3) {
			names = append(names, sr.Tool.Name)
			if sr.Tool.Name == q.Want {
				hits++
			}
		}
		if !slices.Contains(names, q.Want) {
			t.Logf("miss: %q: got %v, want %s", q.Query, names, q.Want)
		}
	}
	t.Logf("holdout: %d/%d queries have their tool in the top 3", hits, len(queries))
	if hits*10 < len(queries)*8 {
		t.Errorf("holdout: got %d/%d, want at least 80%%", hits, len(queries))
	}
}

func TestSearchBasics(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, everyVariable)
	register(t, r, "weather", `{"utcp_version": "1", "tools": [
		{"name": "get_forecast", "description": "Daily forecast", "tags": ["weather"], "tool_call_template": {"call_template_type": "http", "url": "https://w.example/f"}},
		{"name": "get_current", "description": "Current conditions", "tags": ["weather"], "tool_call_template": {"call_template_type": "http", "url": "https://w.example/c"}}]}`)
	if got := r.Search("", 5); len(got) != 0 {
		t.Errorf("empty query: got %d results, want 0", len(got))
	}
	if got := r.Search("the of and", 5); len(got) != 0 {
		t.Errorf("stop words only: got %d results, want 0", len(got))
	}
	got := r.Search("weather.get_current", 1)
	if len(got) != 1 || got[0].Tool.Name != "weather.get_current" {
		t.Errorf("exact name: got %v, want weather.get_current first", got)
	}
	if all := r.Search("weather", 0); len(all) != 2 {
		t.Errorf("limit 0: got %d results, want every match (2)", len(all))
	}
	var _ = utcp.SearchResult{}
}
