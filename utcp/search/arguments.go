package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// argumentWeight weighs the terms of what a request passes to a tool
// rather than what it asks for: quoted text, URLs, addresses, paths
// like owner/repo, identifiers and numbers (see splitArguments).
var argumentWeight = 0.2

// splitArguments separates a request into what it asks for (intent) and
// the values it gives (args): quoted text, and words that are values by
// their shape — a URL, an e-mail address or @handle, a path with a
// hyphen, dot, underscore or digit in it (acme/widgets-api), a word with
// a dot inside (notes.txt), a number, or a long mix of letters and digits
// (CA5f1e2d3c). What is taken out of intent is replaced by a space.
func splitArguments(q string) (intent, args string) {
	var in, ar strings.Builder
	unclosed := map[rune]bool{} // marks with no closing after an opening
	for i := 0; i < len(q); {
		if end, ok := quoted(q, i, unclosed); ok {
			ar.WriteString(q[i:end])
			ar.WriteByte(' ')
			in.WriteByte(' ')
			i = end
			continue
		}
		r, size := utf8.DecodeRuneInString(q[i:])
		if unicode.IsSpace(r) {
			in.WriteRune(r)
			i += size
			continue
		}
		end := i
		for end < len(q) {
			r, n := utf8.DecodeRuneInString(q[end:])
			if unicode.IsSpace(r) {
				break
			}
			end += n
		}
		tok := q[i:end]
		if isValue(tok) {
			ar.WriteString(tok)
			ar.WriteByte(' ')
			in.WriteByte(' ')
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
// after a character that is not a letter or digit (so that the
// apostrophe of "don't" opens nothing) — and closes before the end of q,
// the closing mark followed by no letter or digit; end is past it. A mark
// that found no closing once is in unclosed: no later opening of it can
// find one either (a closing only depends on what follows it), so that a
// query of many unclosed quotes is read once, not once a quote.
func quoted(q string, i int, unclosed map[rune]bool) (end int, ok bool) {
	open, size := utf8.DecodeRuneInString(q[i:])
	closing, isQuote := quotes[open]
	if !isQuote || unclosed[open] {
		return 0, false
	}
	if i > 0 {
		prev, _ := utf8.DecodeLastRuneInString(q[:i])
		if unicode.IsLetter(prev) || unicode.IsDigit(prev) {
			return 0, false
		}
	}
	for j := i + size; j < len(q); {
		r, n := utf8.DecodeRuneInString(q[j:])
		if r == closing && j > i+size {
			next, _ := utf8.DecodeRuneInString(q[j+n:])
			if j+n == len(q) || !(unicode.IsLetter(next) || unicode.IsDigit(next)) {
				return j + n, true
			}
		}
		j += n
	}
	unclosed[open] = true
	return 0, false
}

// isValue reports whether a word is a value by its shape.
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
	if digits > 0 && (letters == 0 || letters+digits >= 6) {
		return true // a number, a date, a phone number, an identifier
	}
	if strings.ContainsRune(tok, '/') && strings.ContainsAny(tok, "-._0123456789") {
		return true // owner/repo-name, a branch like hotfix/payment-timeout
	}
	if i := strings.IndexByte(tok, '.'); i > 0 && i < len(tok)-1 {
		return true // a file or a host name
	}
	return false
}
