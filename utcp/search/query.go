package search

import (
	"unicode/utf8"

	"github.com/exprd/exprd/utcp"
)

// TrimQuery cuts text (a prompt) to a query within the search limits: at
// most utcp.MaxQueryBytes, ending before the term past utcp.MaxQueryTerms.
func TrimQuery(text string) string {
	text = utcp.CutRunes(text, utcp.MaxQueryBytes)
	seen := map[string]bool{}
	for _, w := range splitWordSpans(text) {
		for _, t := range analyze(text[w[0]:w[1]]) {
			seen[t] = true
		}
		if len(seen) > utcp.MaxQueryTerms {
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

// splitWordSpans is the byte spans of text's runs of letters and digits,
// an apostrophe between two of them inside the run ("don't", as analyze
// reads it).
func splitWordSpans(text string) [][2]int {
	var out [][2]int
	start := -1
	for i, r := range text {
		inWord := isWordRune(r)
		if (r == '\'' || r == '’') && start >= 0 {
			next, _ := utf8.DecodeRuneInString(text[i+utf8.RuneLen(r):])
			inWord = isWordRune(next)
		}
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
