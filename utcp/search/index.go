package search

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/exprd/exprd/utcp/manual"

	"github.com/exprd/exprd/utcp"
)

// Index is an immutable snapshot of what BM25F needs: the documents,
// each term's document frequency and the fields' total lengths. Searches
// read it without locks, so nothing in it changes once it is built: with
// derives the next index from it, copying the slice of document pointers
// and the paths of the term tree it changes, sharing everything else.
type Index struct {
	docs   []*searchDoc // sorted by tool name
	terms  *termNode    // document frequencies; its keys are the vocabulary
	total  [numFields]int
	avgLen [numFields]float64

	// postings (each term's documents, by index into docs) and names
	// (each lower-cased full or short name's documents) are built by the
	// first search of this snapshot, outside the registry's lock, so that
	// a search scores only the tools that share a term with it.
	postingsOnce sync.Once
	postings     map[string][]int32
	names        map[string][]int32
}

// post builds the snapshot's postings once.
func (ix *Index) post() {
	ix.postingsOnce.Do(func() {
		ix.postings, ix.names = map[string][]int32{}, map[string][]int32{}
		for i, d := range ix.docs {
			for term := range d.tf {
				ix.postings[term] = append(ix.postings[term], int32(i))
			}
			ix.names[d.name] = append(ix.names[d.name], int32(i))
			if d.short != d.name {
				ix.names[d.short] = append(ix.names[d.short], int32(i))
			}
		}
	})
}

var _ utcp.Index = (*Index)(nil)

// New returns the index of no tools, for utcp.WithIndex.
func New() *Index { return buildIndex(nil) }

// With returns the index of ix's tools less those named in removed
// (sorted) plus added; ix is left as it was (utcp.Index).
func (ix *Index) With(removed []string, added []*manual.Tool) utcp.Index {
	return ix.with(removed, added)
}

// Search ranks ix's tools for query: BM25F over each tool's name, its
// manual's name, tags, description, input property names and what the
// input schema says of them, and an HTTP tool's URL path, with the
// Snowball stemmer, a few common synonyms and everyday phrasings, and
// shared-prefix matches ("reservation" ~ "reserve") counted at a lower
// weight, and the values the query gives (splitArguments) at
// argumentWeight; a query that is a tool's full or short name ranks it
// first. It returns the best
// limit tools (all that match when limit <= 0), best first, ties by name.
// More than utcp.MaxQueryTerms distinct terms is a *utcp.QueryError.
func (ix *Index) Search(ctx context.Context, query string, limit int) ([]utcp.SearchResult, error) {
	return ix.search(ctx, query, limit)
}

// buildIndex indexes tools from scratch. The registry builds its indexes
// with With; buildIndex is the reference they are checked against.
func buildIndex(tools []*manual.Tool) *Index {
	ix := &Index{}
	df := map[string]int{}
	for _, t := range tools {
		d := analyzeTool(t)
		for term := range d.tf {
			df[term]++
		}
		for f := range numFields {
			ix.total[f] += int(d.len[f])
		}
		ix.docs = append(ix.docs, d)
	}
	slices.SortFunc(ix.docs, compareDocs)
	terms := make([]string, 0, len(df))
	for term := range df {
		terms = append(terms, term)
	}
	slices.Sort(terms)
	ix.terms = buildTerms(terms, df)
	ix.average()
	return ix
}

func compareDocs(a, b *searchDoc) int { return strings.Compare(a.tool.Name, b.tool.Name) }

// with returns the index of ix's tools less those named in gone (sorted)
// plus added, whose names must not stay in ix. Only added tools are
// analysed; ix is left as it was. The cost is the copy of ix's document
// pointers plus, per term whose document frequency changes, a path of the
// term tree.
func (ix *Index) with(gone []string, added []*manual.Tool) *Index {
	next := &Index{total: ix.total}
	delta := map[string]int{}
	adds := make([]*searchDoc, len(added))
	for i, t := range added {
		d := analyzeTool(t)
		for term := range d.tf {
			delta[term]++
		}
		for f := range numFields {
			next.total[f] += int(d.len[f])
		}
		adds[i] = d
	}
	slices.SortFunc(adds, compareDocs)
	// Copy the documents that stay in runs between the removed ones and
	// the places of the added ones, found by binary search.
	next.docs = make([]*searchDoc, 0, len(ix.docs)-len(gone)+len(adds))
	at := 0
	for len(gone) > 0 || len(adds) > 0 {
		drop, found := len(ix.docs), false
		if len(gone) > 0 {
			drop, found = ix.find(gone[0])
		}
		if len(adds) > 0 {
			if in, _ := ix.find(adds[0].tool.Name); in <= drop {
				next.docs = append(append(next.docs, ix.docs[at:in]...), adds[0])
				at, adds = in, adds[1:]
				continue
			}
		}
		gone = gone[1:]
		if !found {
			continue
		}
		d := ix.docs[drop]
		for term := range d.tf {
			delta[term]--
		}
		for f := range numFields {
			next.total[f] -= int(d.len[f])
		}
		next.docs = append(next.docs, ix.docs[at:drop]...)
		at = drop + 1
	}
	next.docs = append(next.docs, ix.docs[at:]...)
	next.terms = ix.terms
	for term, n := range delta {
		if n != 0 {
			next.terms = next.terms.withDF(term, termPriority(term), next.terms.df(term)+n)
		}
	}
	next.average()
	return next
}

// find is where the document of the tool of that name is in ix.docs, or
// would be, and whether it is there.
func (ix *Index) find(name string) (int, bool) {
	return slices.BinarySearchFunc(ix.docs, name, func(d *searchDoc, name string) int { return strings.Compare(d.tool.Name, name) })
}

// average sets the fields' average lengths, 1 for a field no tool has.
func (ix *Index) average() {
	if len(ix.docs) == 0 {
		return
	}
	n := float64(len(ix.docs))
	for f := range numFields {
		ix.avgLen[f] = float64(ix.total[f]) / n
		if ix.avgLen[f] == 0 {
			ix.avgLen[f] = 1
		}
	}
}

// checkEvery is how many tools are ranked between looks at the context.
const checkEvery = 256

func (ix *Index) search(ctx context.Context, query string, limit int) ([]utcp.SearchResult, error) {
	terms, err := ix.queryTerms(query)
	if err != nil {
		return nil, err
	}
	if len(terms) == 0 || len(ix.docs) == 0 {
		return nil, nil
	}
	terms = ix.weighed(terms)
	q := strings.ToLower(strings.TrimSpace(query))
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ix.post()
	// Each document's score sums its terms in the terms' order, as a
	// scan of every document would: the same floats, the same ranking.
	scores := map[int32]float64{}
	seen := 0
	for _, qt := range terms {
		for _, i := range ix.postings[qt.term] {
			if seen++; seen%checkEvery == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			scores[i] += ix.termScore(ix.docs[i], qt)
		}
	}
	if q != "" {
		for _, i := range ix.names[q] {
			scores[i] += exactNameBoost
		}
	}
	out := make([]utcp.SearchResult, 0, len(scores))
	for i, score := range scores {
		if score > 0 {
			out = append(out, utcp.SearchResult{Tool: ix.docs[i].tool, Score: score})
		}
	}
	return ranked(out, limit), nil
}

// weighed is the query's terms that some tool has, each with its idf: a
// term no tool has scores nothing, though the query may still be a tool's
// name.
func (ix *Index) weighed(terms []queryTerm) []queryTerm {
	terms = slices.DeleteFunc(terms, func(qt queryTerm) bool { return qt.df == 0 })
	n := float64(len(ix.docs))
	for i := range terms {
		df := float64(terms[i].df)
		terms[i].idf = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	return terms
}

// ranked sorts results best first (by name on a tie) and keeps the best
// limit of them (all when limit <= 0).
func ranked(out []utcp.SearchResult, limit int) []utcp.SearchResult {
	slices.SortFunc(out, func(a, b utcp.SearchResult) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Tool.Name, b.Tool.Name)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// termScore is what one query term adds to a document's score (BM25F).
func (ix *Index) termScore(d *searchDoc, qt queryTerm) float64 {
	tfs := d.tf[qt.term]
	tfw := 0.0
	for f := range numFields {
		tf := tfs[f]
		if tf == 0 {
			continue
		}
		norm := 1 - bm25B + bm25B*d.len[f]/ix.avgLen[f]
		tfw += fieldWeights[f] * tf / norm
	}
	return qt.weight * qt.idf * tfw / (bm25K1 + tfw)
}

// queryTerm is a term of a query, with its document frequency.
type queryTerm struct {
	term   string
	weight float64
	df     int
	idf    float64
}

// queryTerms weighs the query's terms: typed ones 1, the values it gives
// (splitArguments) argumentWeight, synonyms and terms of the index sharing
// a long prefix less. The terms are sorted so that a
// score is summed in the same order every time. More than utcp.MaxQueryTerms
// distinct typed terms is a *QueryError.
func (ix *Index) queryTerms(query string) ([]queryTerm, error) {
	terms := map[string]float64{}
	add := func(t string, w float64) {
		if terms[t] < w {
			terms[t] = w
		}
	}
	if n := distinctTerms(query); n > utcp.MaxQueryTerms {
		return nil, &utcp.QueryError{What: "terms", Limit: utcp.MaxQueryTerms, Got: n}
	}
	intent, args := query, ""
	if argumentWeight < 1 {
		intent, args = splitArguments(query)
	}
	typed := analyze(rewritePhrases(intent))
	for _, t := range typed {
		add(t, 1)
	}
	for _, t := range analyze(args) {
		add(t, argumentWeight)
	}
	for _, t := range typed {
		for _, s := range synonyms[t] {
			add(s, synonymWeight)
		}
	}
	// A related term is weighed from the typed or synonym weight of the
	// term it is related to, whatever order the terms come in.
	for t, w := range maps.Clone(terms) {
		if len(t) < minPrefix {
			continue
		}
		ix.terms.ascend(t, func(v string) bool {
			if !strings.HasPrefix(v, t) {
				return false
			}
			if v != t {
				add(v, prefixWeight*w)
			}
			return true
		})
		for k := minPrefix; k < len(t); k++ {
			if ix.terms.df(t[:k]) > 0 {
				add(t[:k], prefixWeight*w)
			}
		}
	}
	out := make([]queryTerm, 0, len(terms))
	for t, w := range terms {
		out = append(out, queryTerm{term: t, weight: w, df: ix.terms.df(t)})
	}
	slices.SortFunc(out, func(a, b queryTerm) int { return strings.Compare(a.term, b.term) })
	return out, nil
}
