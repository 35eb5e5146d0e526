package search

import (
	"github.com/kljensen/snowball/english"

	"slices"
	"strings"
	"unicode"
)

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
	for i := 0; i < len(rs); i++ {
		r := rs[i]
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
		case (r == '\'' || r == '’') && len(cur) > 0:
			// A contraction's or possessive's tail is no word of its own:
			// "customer's" → customer, "we're" → we; a negated auxiliary
			// ("don't", "won't") is dropped whole, as a stop word.
			tail := contractionTail(rs[i+1:])
			if tail > 0 && unicode.ToLower(rs[i+1]) == 't' && unicode.ToLower(cur[len(cur)-1]) == 'n' {
				cur = cur[:0]
			}
			flush()
			i += tail
		default:
			flush()
		}
	}
	flush()
	return words
}

// contractionTail is the length of the contraction's or possessive's
// tail rs starts with (s, t, d, ll, m, re, ve, then no letter or digit),
// 0 when it starts with none.
func contractionTail(rs []rune) int {
	n := 0
	for n < len(rs) && n < 3 && (unicode.IsLetter(rs[n]) || unicode.IsDigit(rs[n])) {
		n++
	}
	if n == len(rs) || !unicode.IsLetter(rs[n]) && !unicode.IsDigit(rs[n]) {
		switch strings.ToLower(string(rs[:n])) {
		case "s", "t", "d", "ll", "m", "re", "ve":
			return n
		}
	}
	return 0
}

// stem reduces an English word to its stem with the Snowball (Porter2)
// English stemmer, so that "orders", "ordered" and "ordering" meet, and
// "create", "created" and "creating" too. Words of other scripts, and
// words too long to be words, stay as they are.
func stem(w string) string {
	if len(w) <= 3 || len(w) > maxStemLen || !isASCIIWord(w) {
		return w
	}
	return english.Stem(w, false)
}

// maxStemLen is the longest word stem reduces.
const maxStemLen = 64

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
