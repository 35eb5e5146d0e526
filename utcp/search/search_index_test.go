package search

// Internal tests: the registry keeps its search index by deltas (With),
// and these check it against buildIndex over the same tools, which only
// the package can see.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/exprd/exprd/utcp/manual"
	"github.com/exprd/exprd/utcp/vars"

	"github.com/exprd/exprd/utcp"
)

// indexTestRegistry is a registry with every variable bound, room for
// maxTools tools and at most 256 manuals, and a function returning its
// index.
func indexTestRegistry(tb testing.TB, maxTools int) (*utcp.Registry, func() *Index) {
	tb.Helper()
	return testRegistry(tb, utcp.WithMaxTools(maxTools), utcp.WithVariableLoader(vars.LoaderFunc(func(string) (string, bool) { return "test-value", true })))
}

// catalogTools reads the tools of testdata/catalog, one slice per manual,
// each tool as its JSON object.
func catalogTools(tb testing.TB) [][]map[string]any {
	tb.Helper()
	files, err := filepath.Glob("../testdata/catalog/*.json")
	if err != nil || len(files) == 0 {
		tb.Fatalf("testdata/catalog: %v (%d files)", err, len(files))
	}
	var out [][]map[string]any
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var m struct{ Tools []map[string]any }
		if err := json.Unmarshal(raw, &m); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		out = append(out, m.Tools)
	}
	return out
}

func manualText(tb testing.TB, tools []map[string]any) string {
	tb.Helper()
	raw, err := json.Marshal(map[string]any{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": tools})
	if err != nil {
		tb.Fatal(err)
	}
	return string(raw)
}

// extraWords churn the vocabulary: terms sharing prefixes (the prefix
// match), non-ASCII and camelCase words, stop words, synonyms.
var extraWords = []string{
	"reserve", "reservation", "reservations", "reserved", "geolocate", "geolocation",
	"schedule", "scheduling", "café", "naïveté", "日本語", "HTTPServer", "customerOrders",
	"the", "of", "x", "mail", "email", "bill", "invoice", "parcel", "forecasting",
}

// manualVariant is a random manual made of one catalogue manual's tools:
// a random subset of them, some with words added to their description
// and tags, one of the words (unique) being new to the vocabulary.
func manualVariant(tb testing.TB, rng *rand.Rand, source [][]map[string]any, unique string) string {
	tb.Helper()
	src := source[rng.IntN(len(source))]
	var tools []map[string]any
	for _, t := range src {
		if rng.IntN(3) == 0 {
			continue
		}
		c := maps.Clone(t)
		if rng.IntN(2) == 0 {
			desc, _ := c["description"].(string)
			for range rng.IntN(4) {
				desc += " " + extraWords[rng.IntN(len(extraWords))]
			}
			c["description"] = desc + " " + unique
			c["tags"] = []any{extraWords[rng.IntN(len(extraWords))], unique}
		}
		tools = append(tools, c)
	}
	if len(tools) == 0 {
		tools = append(tools, src[0])
	}
	return manualText(tb, tools)
}

// indexQueries are the catalogue's queries and a few that reach the
// prefix match, synonyms and the words manualVariant adds.
func indexQueries(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, f := range []string{"../testdata/search_queries.json", "../testdata/search_queries_holdout.json"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var qs []struct{ Query string }
		if err := json.Unmarshal(raw, &qs); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		for _, q := range qs {
			out = append(out, q.Query)
		}
	}
	return append(out, "", "the of", "reserve a room", "reservations", "geoloc", "geolocation", "café", "日本語",
		"customer orders", "http server", "send mail", "weather", "how much does shipping cost", "uniq", "uniq3 uniq7")
}

// indexDump renders everything search reads from an index.
func indexDump(ix *Index) string {
	var b strings.Builder
	for _, d := range ix.docs {
		fmt.Fprintf(&b, "doc %s %p %v\n", d.tool.Name, d, d.len)
	}
	ix.terms.ascend("", func(term string) bool {
		fmt.Fprintf(&b, "term %q %d\n", term, ix.terms.df(term))
		return true
	})
	fmt.Fprintf(&b, "total %v avg %v\n", ix.total, ix.avgLen)
	return b.String()
}

// resultsDump renders the ranking of every query, scores in full.
func resultsDump(tb testing.TB, ix *Index, queries []string) string {
	tb.Helper()
	var b strings.Builder
	for _, q := range queries {
		res, err := ix.search(context.Background(), q, 0)
		if err != nil {
			tb.Fatalf("search %q: %v", q, err)
		}
		fmt.Fprintf(&b, "%q:", q)
		for _, r := range res {
			fmt.Fprintf(&b, " %s=%v", r.Tool.Name, r.Score)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// checkTerms checks the term tree's invariants: terms in order, each
// node's priority its term's and no lower than its children's, every
// document frequency positive.
func checkTerms(t *testing.T, n *termNode, lo, hi string) {
	t.Helper()
	if n == nil {
		return
	}
	if (lo != "" && n.term <= lo) || (hi != "" && n.term >= hi) {
		t.Fatalf("term tree: %q is out of order (between %q and %q)", n.term, lo, hi)
	}
	if n.prio != termPriority(n.term) || n.n <= 0 {
		t.Fatalf("term tree: %q has priority %d and frequency %d, want %d and > 0", n.term, n.prio, n.n, termPriority(n.term))
	}
	for _, c := range []*termNode{n.left, n.right} {
		if c != nil && c.prio > n.prio {
			t.Fatalf("term tree: %q is below %q with a higher priority", c.term, n.term)
		}
	}
	checkTerms(t, n.left, lo, n.term)
	checkTerms(t, n.right, n.term, hi)
}

// compareWithRebuild checks the registry's index against buildIndex over
// the registry's tools: the same documents and statistics, and for every
// query the same tools in the same order with the same scores. The
// registry's list of tools must be sorted, as the index's documents are.
func compareWithRebuild(t *testing.T, r *utcp.Registry, ix *Index, queries []string) {
	t.Helper()
	tools := r.List()
	names := make([]string, len(tools))
	for i, tool := range tools {
		names[i] = tool.Name
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Fatalf("names: got %v, want them sorted, each once", names)
	}
	ref := buildIndex(tools)
	checkTerms(t, ix.terms, "", "")
	if len(ix.docs) != len(tools) {
		t.Fatalf("docs: got %d, want %d", len(ix.docs), len(tools))
	}
	for i, d := range ix.docs {
		if d.tool != tools[i] {
			t.Fatalf("doc %d: got %s, want %s", i, d.tool.Name, tools[i].Name)
		}
	}
	// The documents are different pointers; the rest must be equal.
	if got, want := indexStats(ix), indexStats(ref); got != want {
		t.Fatalf("index statistics differ from a rebuild:\ngot  %s\nwant %s", got, want)
	}
	for _, q := range queries {
		got, err := ix.search(context.Background(), q, 0)
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		want, err := ref.search(context.Background(), q, 0)
		if err != nil {
			t.Fatalf("rebuilt search %q: %v", q, err)
		}
		if len(got) != len(want) {
			t.Fatalf("search %q: got %d results, want %d as a rebuild", q, len(got), len(want))
		}
		for i := range got {
			if got[i].Tool != want[i].Tool || math.Abs(got[i].Score-want[i].Score) > 1e-9 {
				t.Fatalf("search %q, result %d: got %s %v, want %s %v as a rebuild", q, i, got[i].Tool.Name, got[i].Score, want[i].Tool.Name, want[i].Score)
			}
		}
	}
}

func indexStats(ix *Index) string {
	d := indexDump(ix)
	var keep []string
	for _, l := range strings.Split(d, "\n") {
		if !strings.HasPrefix(l, "doc ") {
			keep = append(keep, l)
		}
	}
	for _, doc := range ix.docs {
		keep = append(keep, fmt.Sprintf("%s %v %v", doc.tool.Name, doc.len, doc.tf))
	}
	return strings.Join(keep, "\n")
}

// TestIncrementalIndexMatchesRebuild registers, replaces and removes
// manuals in a random (seeded) order; after each step the index the
// registry kept by deltas must rank every query as buildIndex over the
// same tools does, and the snapshot before the step must be unchanged.
func TestIncrementalIndexMatchesRebuild(t *testing.T) {
	t.Parallel()
	source := catalogTools(t)
	queries := indexQueries(t)
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 0))
			r, index := indexTestRegistry(t, utcp.DefaultMaxTools)
			names := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
			ctx := context.Background()
			for step := range 120 {
				before := index()
				beforeIndex, beforeResults := indexDump(before), resultsDump(t, before, queries)
				name := names[rng.IntN(len(names))]
				_, registered := r.Manual(name)
				text := manualVariant(t, rng, source, fmt.Sprintf("uniq%d", step))
				var op string
				var err error
				switch k := rng.IntN(3); {
				case !registered:
					op = "register"
					_, err = r.Register(ctx, name, utcp.FromText(text).AllowProtocols(utcp.TypeHTTP))
				case k == 0:
					op = "remove"
					_, err = r.Remove(name)
				default:
					op = "replace"
					_, err = r.Replace(ctx, name, utcp.FromText(text).AllowProtocols(utcp.TypeHTTP))
				}
				if err != nil {
					t.Fatalf("step %d: %s %s: %v", step, op, name, err)
				}
				after := index()
				if after == before {
					t.Fatalf("step %d: %s %s published no new index", step, op, name)
				}
				compareWithRebuild(t, r, after, queries)
				if got := indexDump(before); got != beforeIndex {
					t.Fatalf("step %d: %s %s changed the snapshot before it:\ngot  %s\nwant %s", step, op, name, got, beforeIndex)
				}
				if got := resultsDump(t, before, queries); got != beforeResults {
					t.Fatalf("step %d: %s %s changed the rankings of the snapshot before it", step, op, name)
				}
			}
		})
	}
}

// TestTermTreePersistent changes a term tree at random and checks every
// version against a map kept alongside: lookups, order, prefix walks, and
// that no later change reaches an earlier version.
func TestTermTreePersistent(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 0))
	var roots []*termNode
	var wants []map[string]int
	var root *termNode
	want := map[string]int{}
	for range 2000 {
		term := fmt.Sprintf("t%03d", rng.IntN(300))
		n := max(want[term]+rng.IntN(5)-2, 0)
		root = root.withDF(term, termPriority(term), n)
		if n == 0 {
			delete(want, term)
		} else {
			want[term] = n
		}
		roots = append(roots, root)
		wants = append(wants, maps.Clone(want))
	}
	for i, root := range roots {
		checkTerms(t, root, "", "")
		var got []string
		root.ascend("", func(term string) bool { got = append(got, term); return true })
		if w := slices.Sorted(maps.Keys(wants[i])); !slices.Equal(got, w) {
			t.Fatalf("version %d: got terms %v, want %v", i, got, w)
		}
		for term, n := range wants[i] {
			if root.df(term) != n {
				t.Fatalf("version %d: df(%q) got %d, want %d", i, term, root.df(term), n)
			}
		}
		var from []string
		root.ascend("t1", func(term string) bool { from = append(from, term); return strings.HasPrefix(term, "t1") })
		var wantFrom []string
		for _, term := range slices.Sorted(maps.Keys(wants[i])) {
			if term >= "t1" {
				wantFrom = append(wantFrom, term)
				if !strings.HasPrefix(term, "t1") {
					break
				}
			}
		}
		if !slices.Equal(from, wantFrom) {
			t.Fatalf("version %d: a walk from t1 got %v, want %v", i, from, wantFrom)
		}
	}
	sorted := slices.Sorted(maps.Keys(want))
	if got, w := indexDump(&Index{terms: buildTerms(sorted, want)}), indexDump(&Index{terms: root}); got != w {
		t.Errorf("buildTerms: got\n%s\nwant (as the changes built it)\n%s", got, w)
	}
}

// A term related by prefix to a synonym used to take its weight from
// whatever weight the synonym had reached when map iteration came to it,
// raised or not by another term's prefix match: "book scheduler" weighed
// "schedulebot" 0.3 or 0.36 at random. It is weighed from the synonym's
// own weight now. ("book" alone: the stemmer now makes "scheduler" the
// typed "schedul" itself.)
func TestPrefixWeightIndependentOfTermOrder(t *testing.T) {
	t.Parallel()
	ix := buildIndex([]*manual.Tool{
		{Name: "m.a", Description: "schedulebot"},
		{Name: "m.b", Description: "schedules meetings"},
	})
	want := prefixWeight * synonymWeight
	for range 50 {
		terms, err := ix.queryTerms("book")
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(terms, func(qt queryTerm) bool { return qt.term == "schedulebot" })
		if i < 0 || terms[i].weight != want {
			t.Fatalf("schedulebot: got %v, want weight %v", terms, want)
		}
	}
}

// TestIndexSnapshotsUnderConcurrentChanges searches while manuals come and
// go: with -race, any write to a published snapshot is reported.
func TestIndexSnapshotsUnderConcurrentChanges(t *testing.T) {
	t.Parallel()
	source := catalogTools(t)
	queries := indexQueries(t)
	r, index := indexTestRegistry(t, utcp.DefaultMaxTools)
	ctx := context.Background()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if _, err := r.SearchContext(ctx, queries[i%len(queries)], 5); err != nil {
					t.Errorf("search: %v", err)
					return
				}
			}
		})
	}
	rng := rand.New(rand.NewPCG(11, 0))
	for step := range 60 {
		name := fmt.Sprintf("m%d", rng.IntN(5))
		if rng.IntN(4) == 0 {
			_, _ = r.Remove(name)
			continue
		}
		text := manualVariant(t, rng, source, fmt.Sprintf("uniq%d", step))
		if _, err := r.Replace(ctx, name, utcp.FromText(text).AllowProtocols(utcp.TypeHTTP)); err != nil {
			t.Errorf("replace %s: %v", name, err)
		}
	}
	close(done)
	wg.Wait()
	compareWithRebuild(t, r, index(), queries)
}

// BenchmarkRegisterSmallManual registers a three-tool manual into a
// registry of n tools: the index's part of the registry's step under its
// lock, with the index kept by deltas ("incremental", Index.With) and
// rebuilt over every tool ("full"); and, through the public API,
// registering and removing the manual, reading and checking it included
// ("register+remove").
func BenchmarkRegisterSmallManual(b *testing.B) {
	source := catalogTools(b)
	var all []map[string]any
	for _, tools := range source {
		all = append(all, tools...)
	}
	ctx := context.Background()
	for _, n := range []int{100, 1000, 10000} {
		r, index := indexTestRegistry(b, 2*n)
		const perManual = 50
		for m := 0; m*perManual < n; m++ {
			var tools []map[string]any
			for i := m * perManual; i < min(n, (m+1)*perManual); i++ {
				t := maps.Clone(all[i%len(all)])
				t["name"] = fmt.Sprintf("%s_%d", t["name"], i)
				tools = append(tools, t)
			}
			if _, err := r.Register(ctx, fmt.Sprintf("m%03d", m), utcp.FromText(manualText(b, tools)).AllowProtocols(utcp.TypeHTTP)); err != nil {
				b.Fatal(err)
			}
		}
		small := utcp.FromText(manualText(b, source[0][:3])).AllowProtocols(utcp.TypeHTTP)
		base := index()
		if len(base.docs) != n {
			b.Fatalf("got %d tools, want %d", len(base.docs), n)
		}
		// The small manual's tools, as the registry would index them.
		reg, err := r.Register(ctx, "small", small)
		if err != nil {
			b.Fatal(err)
		}
		var added []*manual.Tool
		for _, name := range reg.Tools {
			tool, err := r.Tool(name)
			if err != nil {
				b.Fatal(err)
			}
			added = append(added, tool)
		}
		if _, err := r.Remove("small"); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("tools=%d/incremental", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				base.With(nil, added)
			}
		})
		b.Run(fmt.Sprintf("tools=%d/register+remove", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Register(ctx, "small", small); err != nil {
					b.Fatal(err)
				}
				if _, err := r.Remove("small"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("tools=%d/full", n), func(b *testing.B) {
			b.ReportAllocs()
			tools := append(r.List(), added...)
			for b.Loop() {
				buildIndex(tools)
			}
		})
	}
}
