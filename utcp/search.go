package utcp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// SearchResult is one ranked tool.
type SearchResult struct {
	Tool  *Tool
	Score float64
}

// Search ranks every registered tool for a query written as a person would
// ask ("send an email to a customer") and returns the best limit of them
// (all that match when limit <= 0), best first. Ranking is BM25F over the
// tool's name, its manual's name, tags, description and input property
// names, with light stemming, a few common synonyms and shared-prefix
// matches ("reservation" ~ "reserve") counted at a lower weight.
//
// Search is SearchContext without a deadline, for a query known to be
// within the limits (see TrimQuery); a query past them ranks nothing.
func (r *Registry) Search(query string, limit int) []SearchResult {
	out, _ := r.SearchContext(context.Background(), query, limit)
	return out
}

// Search limits. A query is compared with every tool and each of its
// longer terms with the vocabulary, so its size bounds the work.
const (
	// MaxQueryBytes bounds a query's length.
	MaxQueryBytes = 4096
	// MaxQueryTerms bounds the distinct terms a query has once stop words
	// are dropped.
	MaxQueryTerms = 32
)

// QueryError is a search query past MaxQueryBytes or MaxQueryTerms.
type QueryError struct {
	What  string // "bytes" or "terms"
	Limit int
	Got   int
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("utcp: the query has %d %s, over the limit of %d", e.Got, e.What, e.Limit)
}

// Is reports whether target is ErrInvalidArguments.
func (e *QueryError) Is(target error) bool { return target == ErrInvalidArguments }

// SearchContext is Search under ctx: a query past the limits is a
// *QueryError, and a cancelled ctx stops the ranking (its error).
func (r *Registry) SearchContext(ctx context.Context, query string, limit int) ([]SearchResult, error) {
	if len(query) > MaxQueryBytes {
		return nil, &QueryError{What: "bytes", Limit: MaxQueryBytes, Got: len(query)}
	}
	return r.cat.Load().index.search(ctx, query, limit)
}

// TrimQuery cuts text (a prompt) to a query within the search limits: at
// most MaxQueryBytes, ending before the term past MaxQueryTerms.
func TrimQuery(text string) string {
	if len(text) > MaxQueryBytes {
		cut := MaxQueryBytes
		for cut > 0 && !utf8RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
	}
	seen := map[string]bool{}
	for _, w := range splitWordSpans(text) {
		for _, t := range analyze(text[w[0]:w[1]]) {
			seen[t] = true
		}
		if len(seen) > MaxQueryTerms {
			return text[:w[0]]
		}
	}
	return text
}

// distinctTerms counts the query's distinct terms, as TrimQuery does.
func distinctTerms(query string) int {
	seen := map[string]bool{}
	for _, t := range analyze(query) {
		seen[t] = true
	}
	return len(seen)
}

// splitWordSpans is the byte spans of text's runs of letters and digits.
func splitWordSpans(text string) [][2]int {
	var out [][2]int
	start := -1
	for i, r := range text {
		inWord := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case inWord && start < 0:
			start = i
		case !inWord && start >= 0:
			out = append(out, [2]int{start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, [2]int{start, len(text)})
	}
	return out
}

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
	tool *Tool
	// name and short are the tool's full and short names, lower-cased,
	// for the exact-name boost.
	name, short string
	tf          map[string][numFields]float64 // each term's count in each field
	len         [numFields]float64            // terms in each field
}

func analyzeTool(t *Tool) *searchDoc {
	short := strings.TrimPrefix(t.Name, t.manual+".")
	d := &searchDoc{tool: t, name: strings.ToLower(t.Name), short: strings.ToLower(short), tf: map[string][numFields]float64{}}
	names, descs := schemaText(t.Inputs)
	texts := [numFields][]string{
		fieldName:      {short},
		fieldManual:    {t.manual},
		fieldTags:      t.Tags,
		fieldDesc:      {t.Description},
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

// searchIndex is an immutable snapshot of what BM25F needs: the documents,
// each term's document frequency and the fields' total lengths. Searches
// read it without locks, so nothing in it changes once it is built: with
// derives the next index from it, copying the slice of document pointers
// and the paths of the term tree it changes, sharing everything else.
type searchIndex struct {
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
func (ix *searchIndex) post() {
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

// buildIndex indexes tools from scratch. The registry builds its indexes
// with with; buildIndex is the reference they are checked against.
func buildIndex(tools []*Tool) *searchIndex {
	ix := &searchIndex{}
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
	ix.terms = buildTerms(sortedKeys(df), df)
	ix.average()
	return ix
}

func compareDocs(a, b *searchDoc) int { return strings.Compare(a.tool.Name, b.tool.Name) }

// with returns the index of ix's tools less those named in gone (sorted)
// plus added, whose names must not stay in ix. Only added tools are
// analysed; ix is left as it was. The cost is the copy of ix's document
// pointers plus, per term whose document frequency changes, a path of the
// term tree.
func (ix *searchIndex) with(gone []string, added []*Tool) *searchIndex {
	next := &searchIndex{total: ix.total}
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
func (ix *searchIndex) find(name string) (int, bool) {
	return slices.BinarySearchFunc(ix.docs, name, func(d *searchDoc, name string) int { return strings.Compare(d.tool.Name, name) })
}

// average sets the fields' average lengths, 1 for a field no tool has.
func (ix *searchIndex) average() {
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

func (ix *searchIndex) search(ctx context.Context, query string, limit int) ([]SearchResult, error) {
	terms, err := ix.queryTerms(query)
	if err != nil {
		return nil, err
	}
	if len(terms) == 0 || len(ix.docs) == 0 {
		return nil, nil
	}
	// A term no tool has scores nothing, though the query may still be a
	// tool's name.
	terms = slices.DeleteFunc(terms, func(qt queryTerm) bool { return qt.df == 0 })
	n := float64(len(ix.docs))
	for i := range terms {
		df := float64(terms[i].df)
		terms[i].idf = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
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
	out := make([]SearchResult, 0, len(scores))
	for i, score := range scores {
		if score > 0 {
			out = append(out, SearchResult{Tool: ix.docs[i].tool, Score: score})
		}
	}
	return ranked(out, limit), nil
}

// ranked sorts results best first (by name on a tie) and keeps the best
// limit of them (all when limit <= 0).
func ranked(out []SearchResult, limit int) []SearchResult {
	slices.SortFunc(out, func(a, b SearchResult) int {
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
func (ix *searchIndex) termScore(d *searchDoc, qt queryTerm) float64 {
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

// queryTerms weighs the query's terms: typed ones 1, synonyms and terms of
// the index sharing a long prefix less. The terms are sorted so that a
// score is summed in the same order every time. More than MaxQueryTerms
// distinct typed terms is a *QueryError.
func (ix *searchIndex) queryTerms(query string) ([]queryTerm, error) {
	terms := map[string]float64{}
	add := func(t string, w float64) {
		if terms[t] < w {
			terms[t] = w
		}
	}
	if n := distinctTerms(query); n > MaxQueryTerms {
		return nil, &QueryError{What: "terms", Limit: MaxQueryTerms, Got: n}
	}
	typed := analyze(rewritePhrases(query))
	for _, t := range typed {
		add(t, 1)
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

// phrases are everyday ways of asking, rewritten into the words tools use.
var phrases = strings.NewReplacer(
	"how long", "time duration",
	"how much", "price cost amount",
	"how many", "count number",
	"right now", "current",
	"money back", "refund",
	"look up", "lookup",
	"sign up", "signup",
)

func rewritePhrases(q string) string { return phrases.Replace(strings.ToLower(q)) }

// analyze splits text into terms: words split at non-letters and camelCase
// humps, lower-cased, stop words dropped, stemmed.
func analyze(text string) []string {
	var out []string
	for _, w := range splitWords(text) {
		w = strings.ToLower(w)
		if stopWords[w] || w == "" {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

func splitWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, string(cur))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			// A hump: lower→Upper, or the last capital of an acronym before a
			// lower-case letter (HTTPServer → HTTP Server).
			if len(cur) > 0 && unicode.IsUpper(r) {
				prev := cur[len(cur)-1]
				nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
				if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
					flush()
				}
			}
			cur = append(cur, r)
		case r == '\'':
			// "customer's" → customer
			flush()
		default:
			flush()
		}
	}
	flush()
	return words
}

// stem strips common English suffixes so that "orders", "ordered" and
// "ordering" meet, and "create", "created" and "creating" too. It is
// deliberately light: related forms it misses are caught by the
// shared-prefix match.
func stem(w string) string {
	if len(w) <= 3 || !isASCIIWord(w) {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "zes"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ss") || strings.HasSuffix(w, "us") || strings.HasSuffix(w, "is"):
	case strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	switch {
	case strings.HasSuffix(w, "ing") && len(w) > 5:
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && len(w) > 4:
		w = undouble(w[:len(w)-2])
	}
	if strings.HasSuffix(w, "e") && len(w) > 4 {
		w = w[:len(w)-1]
	}
	return w
}

func undouble(w string) string {
	n := len(w)
	if n >= 2 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouls", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

func isASCIIWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the to of for in on at by from with into onto about and or but not no
		is are was were be been being am do does did done have has had having will would should could can may might must
		i me my mine we us our you your he she it its they them their this that these those there here
		what which who whom whose when where why how all any some each every please want need like just also
		so then than too very up out over via per one`) {
		m[w] = true
	}
	return m
}()

// synonyms links everyday words for the same action or thing (stemmed
// when the index is built).
var synonyms = func() map[string][]string {
	groups := [][]string{
		{"email", "mail"},
		{"delete", "remove", "erase"},
		{"find", "search", "lookup", "look", "query"},
		{"create", "add", "new", "make"},
		{"update", "edit", "change", "modify"},
		{"fetch", "retrieve", "read", "get", "show", "view"},
		{"list", "enumerate", "browse"},
		{"buy", "purchase", "order"},
		{"price", "cost", "quote"},
		{"photo", "image", "picture"},
		{"customer", "client"},
		{"invoice", "bill"},
		{"pay", "payment", "charge"},
		{"meeting", "event", "appointment"},
		{"book", "reserve", "schedule"},
		{"issue", "ticket", "bug"},
		{"repo", "repository"},
		{"doc", "document"},
		{"stop", "cancel", "halt"},
		{"start", "launch", "run"},
		{"message", "text", "sms"},
		{"car", "vehicle", "drive"},
		{"currency", "euro", "dollar", "yen", "pound", "franc", "peso", "rupee", "yuan"},
		{"hotel", "room", "accommodation"},
		{"movie", "film"},
		{"song", "track", "music"},
		{"weather", "forecast", "temperature"},
		{"user", "account", "member"},
		{"employee", "staff", "worker"},
		{"salary", "payroll", "wage"},
		{"shipment", "delivery", "parcel", "package"},
		{"stock", "inventory"},
		{"remind", "alert", "notify", "notification"},
		{"map", "direction", "route"},
		{"summarize", "summary", "digest"},
		// Arithmetic as people say it: "what is 2 plus 3?"
		{"add", "plus", "sum"},
		{"subtract", "minus", "difference"},
		{"multiply", "times"},
		{"divide", "divided", "quotient"},
	}
	m := map[string][]string{}
	for _, g := range groups {
		for _, a := range g {
			sa := stem(a)
			for _, b := range g {
				if sb := stem(b); sb != sa && !slices.Contains(m[sa], sb) {
					m[sa] = append(m[sa], sb)
				}
			}
		}
	}
	return m
}()

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
func firstSentences(text string, n int) string {
	if len(text) <= n {
		return text
	}
	cut := strings.LastIndexByte(text[:n], ' ')
	if cut <= 0 {
		cut = n
		for cut > 0 && !utf8RuneStart(text[cut]) {
			cut--
		}
	}
	return text[:cut]
}

// urlPathWords is the words of an HTTP template's URL path, without its
// {parameters}, version segments (v1, 2010-04-01) and extensions (.json).
func urlPathWords(t *CallTemplate) []string {
	if t == nil {
		return nil
	}
	u, _ := t.fields["url"].(string)
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
