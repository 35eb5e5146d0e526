package search

import (
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
