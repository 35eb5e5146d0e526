package utcp

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
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
// longer terms with the whole vocabulary, so its size bounds the work.
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
	numFields
)

var fieldWeights = [numFields]float64{
	fieldName:   3.0,
	fieldManual: 1.5,
	fieldTags:   2.0,
	fieldDesc:   1.0,
	fieldParams: 0.7,
}

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// Weights of query terms that were not typed but derived.
	synonymWeight = 0.5
	prefixWeight  = 0.6
	// minPrefix is the shortest shared prefix that makes two terms related.
	minPrefix = 5
	// exactNameBoost is added when the query is a tool's name.
	exactNameBoost = 100
)

type searchDoc struct {
	tool *Tool
	tf   [numFields]map[string]float64
	len  [numFields]float64
}

type searchIndex struct {
	docs   []searchDoc
	df     map[string]int
	avgLen [numFields]float64
	vocab  []string
}

func buildIndex(tools []*Tool) *searchIndex {
	ix := &searchIndex{df: map[string]int{}}
	for _, t := range tools {
		d := searchDoc{tool: t}
		short := strings.TrimPrefix(t.Name, t.manual+".")
		texts := [numFields][]string{
			fieldName:   {short},
			fieldManual: {t.manual},
			fieldTags:   t.Tags,
			fieldDesc:   {t.Description},
			fieldParams: t.inputProps,
		}
		seen := map[string]bool{}
		for f, parts := range texts {
			d.tf[f] = map[string]float64{}
			for _, p := range parts {
				for _, term := range analyze(p) {
					d.tf[f][term]++
					d.len[f]++
					if !seen[term] {
						seen[term] = true
						ix.df[term]++
					}
				}
			}
			ix.avgLen[f] += d.len[f]
		}
		ix.docs = append(ix.docs, d)
	}
	if n := float64(len(ix.docs)); n > 0 {
		for f := range ix.avgLen {
			ix.avgLen[f] /= n
			if ix.avgLen[f] == 0 {
				ix.avgLen[f] = 1
			}
		}
	}
	ix.vocab = sortedKeys(ix.df)
	return ix
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
	n := float64(len(ix.docs))
	q := strings.ToLower(strings.TrimSpace(query))
	var out []SearchResult
	for i := range ix.docs {
		if i%checkEvery == checkEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		d := &ix.docs[i]
		score := 0.0
		for term, qw := range terms {
			tfw := 0.0
			for f := range numFields {
				tf := d.tf[f][term]
				if tf == 0 {
					continue
				}
				norm := 1 - bm25B + bm25B*d.len[f]/ix.avgLen[f]
				tfw += fieldWeights[f] * tf / norm
			}
			if tfw == 0 {
				continue
			}
			df := float64(ix.df[term])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			score += qw * idf * tfw / (bm25K1 + tfw)
		}
		if q != "" && (q == strings.ToLower(d.tool.Name) || q == strings.ToLower(strings.TrimPrefix(d.tool.Name, d.tool.manual+"."))) {
			score += exactNameBoost
		}
		if score > 0 {
			out = append(out, SearchResult{Tool: d.tool, Score: score})
		}
	}
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
	return out, nil
}

// queryTerms weighs the query's terms: typed ones 1, synonyms and terms of
// the index sharing a long prefix less. More than MaxQueryTerms distinct
// typed terms is a *QueryError.
func (ix *searchIndex) queryTerms(query string) (map[string]float64, error) {
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
	for t := range maps(terms) {
		if len(t) < minPrefix {
			continue
		}
		for _, v := range ix.vocab {
			if v != t && len(v) >= minPrefix && (strings.HasPrefix(v, t) || strings.HasPrefix(t, v)) {
				add(v, prefixWeight*terms[t])
			}
		}
	}
	return terms, nil
}

func maps(m map[string]float64) map[string]float64 {
	c := make(map[string]float64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
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
