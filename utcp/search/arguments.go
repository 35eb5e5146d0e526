package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// argumentWeight weighs the terms of what a request passes to a tool
// rather than what it asks for: quoted text, URLs, addresses, paths
// like owner/repo-name, identifiers and numbers (see splitArguments).
var argumentWeight = 0.2

// splitArguments separates a request into what it asks for (intent) and
// the values it gives (args): quoted text (a quotation may open inside a
// word's run, as in title="Login broken"), and words that are values by
// their shape (isValue). What is taken out of intent is replaced by a
// space. It reads q once: a quotation mark that found no closing is not
// looked for again.
func splitArguments(q string) (intent, args string) {
	var in, ar strings.Builder
	unclosed := map[rune]bool{} // marks with no closing after an opening
	take := func(value string) {
		ar.WriteString(value)
		ar.WriteByte(' ')
		in.WriteByte(' ')
	}
	for i := 0; i < len(q); {
		if end, ok := quoted(q, i, unclosed); ok {
			take(q[i:end])
			i = end
			continue
		}
		r, size := utf8.DecodeRuneInString(q[i:])
		if unicode.IsSpace(r) {
			in.WriteString(q[i : i+size])
			i += size
			continue
		}
		// A word's run: up to a space, or a quotation opening inside it.
		end := i + size
		for end < len(q) {
			r, n := utf8.DecodeRuneInString(q[end:])
			if unicode.IsSpace(r) {
				break
			}
			if _, ok := quoted(q, end, unclosed); ok {
				break
			}
			end += n
		}
		if tok := q[i:end]; isValue(tok) {
			take(tok)
		} else {
			in.WriteString(tok)
		}
		i = end
	}
	return in.String(), ar.String()
}

// quotes pairs each opening quotation mark with its closing one.
var quotes = map[rune]rune{'"': '"', '\'': '\'', '“': '”', '‘': '’', '«': '»', '`': '`'}

// quoted reports whether a quotation opens at q[i] — at the start or
// after a character that is not a letter or digit, so that the
// apostrophe of "don't" opens nothing — and closes before the end of q,
// its closing mark followed by no letter or digit; end is past it. A mark
// that found no closing once is in unclosed: no later opening of it can
// find one either (a closing depends only on what follows it and lies in
// the earlier scan's range), so that a query of unclosed quotes is read
// once, not once a quote.
func quoted(q string, i int, unclosed map[rune]bool) (end int, ok bool) {
	open, size := utf8.DecodeRuneInString(q[i:])
	closing, isQuote := quotes[open]
	if !isQuote || unclosed[open] {
		return 0, false
	}
	if i > 0 {
		prev, _ := utf8.DecodeLastRuneInString(q[:i])
		if isWordRune(prev) {
			return 0, false
		}
	}
	for j := i + size; j < len(q); {
		r, n := utf8.DecodeRuneInString(q[j:])
		if r == closing && j > i+size {
			next, _ := utf8.DecodeRuneInString(q[j+n:])
			if j+n == len(q) || !isWordRune(next) {
				return j + n, true
			}
		}
		j += n
	}
	unclosed[open] = true
	return 0, false
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// isValue reports whether a word is a value by its shape: a URL, an
// e-mail address or @handle, #482, a number (a date, a phone number), an
// identifier (at least 8 letters and digits, 2 of them digits:
// CA5f1e2d3c, not sha256 or python3), a path with a hyphen, dot,
// underscore or digit in it (octo-org/billing-service; vuejs/core stays
// words), or a file or host name (notes.txt, example.com; not an
// abbreviation like e.g.).
func isValue(tok string) bool {
	tok = strings.TrimRightFunc(tok, func(r rune) bool { return unicode.IsPunct(r) && r != '/' })
	if tok == "" {
		return false
	}
	if strings.Contains(tok, "://") || strings.ContainsRune(tok, '@') || strings.HasPrefix(tok, "#") {
		return true
	}
	var letters, digits int
	for _, r := range tok {
		switch {
		case unicode.IsLetter(r):
			letters++
		case unicode.IsDigit(r):
			digits++
		}
	}
	if digits > 0 && (letters == 0 || letters+digits >= 8 && digits >= 2) {
		return true
	}
	if strings.ContainsRune(tok, '/') && strings.ContainsAny(tok, "-._0123456789") {
		return true
	}
	if i := strings.IndexByte(tok, '.'); i > 0 && i < len(tok)-1 && !abbreviation(tok) {
		return true
	}
	return false
}

// abbreviation reports whether every part of a dotted word is one letter
// (e.g, U.S).
func abbreviation(tok string) bool {
	for part := range strings.SplitSeq(tok, ".") {
		if utf8.RuneCountInString(part) > 1 {
			return false
		}
	}
	return true
}
