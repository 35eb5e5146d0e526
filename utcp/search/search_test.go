package search_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp"
	"github.com/exprd/exprd/utcp/internal/utcptest"
	"github.com/exprd/exprd/utcp/search"
)

// MinSearchHits is how many of the 30 queries must find their tool in the
// top 3.
const MinSearchHits = 28

// TestSearchCatalogue ranks the whole catalogue of testdata/catalog (40
// manuals, over 300 tools, near-duplicates across domains) for queries
// written as a user would ask them.
func TestSearchCatalogue(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t, utcptest.EveryVariable)
	if _, err := r.LoadDir(context.Background(), "../testdata/catalog"); err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	if n := len(r.List()); n < 300 {
		t.Fatalf("catalogue: got %d tools, want at least 300", n)
	}
	raw, err := os.ReadFile("../testdata/search_queries.json")
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
	r := utcptest.NewRegistry(t, utcptest.EveryVariable)
	if _, err := r.LoadDir(context.Background(), "../testdata/catalog"); err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	raw, err := os.ReadFile("../testdata/search_queries_holdout.json")
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
	r := utcptest.NewRegistry(t, utcptest.EveryVariable)
	utcptest.Register(t, r, "weather", `{"utcp_version": "1", "tools": [
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

// A query is bounded in bytes and in distinct terms: at the limits it is
// ranked, one past them it is a *QueryError; TrimQuery cuts a prompt to
// fit, and a cancelled context stops the ranking.
func TestSearchLimits(t *testing.T) {
	t.Parallel()
	r := utcptest.NewRegistry(t, utcptest.EveryVariable)
	if _, err := r.LoadDir(context.Background(), "../testdata/catalog"); err != nil {
		t.Fatal(err)
	}
	words := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "w%d ", i)
		}
		return b.String()
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		query string
		want  string // the QueryError's What, "" for none
	}{
		{"bytes at the limit", "send email" + strings.Repeat(" ", utcp.MaxQueryBytes-len("send email")), ""},
		{"bytes one past the limit", "send email" + strings.Repeat(" ", utcp.MaxQueryBytes-len("send email")+1), "bytes"},
		{"terms at the limit", words(utcp.MaxQueryTerms), ""},
		{"terms one past the limit", words(utcp.MaxQueryTerms + 1), "terms"},
		{"repeated terms count once", strings.Repeat("email ", 500), ""},
	} {
		_, err := r.SearchContext(ctx, tc.query, 5)
		var qe *utcp.QueryError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: got %v, want no error", tc.name, err)
		case tc.want != "" && (!errors.As(err, &qe) || qe.What != tc.want || !errors.Is(err, manual.ErrInvalidArguments)):
			t.Errorf("%s: got %v, want a QueryError on %s", tc.name, err, tc.want)
		}
		if trimmed := search.TrimQuery(tc.query); trimmed != tc.query || tc.want != "" {
			if _, err := r.SearchContext(ctx, trimmed, 5); err != nil {
				t.Errorf("%s: TrimQuery's query: %v", tc.name, err)
			}
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.SearchContext(cancelled, "send an email", 5); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled search: got %v, want context.Canceled", err)
	}
}
