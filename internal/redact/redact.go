package redact

import (
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The placeholders.
const (
	urlMark     = "[url]"
	hostMark    = "[host]"
	addressMark = "[address]"
	emailMark   = "[email]"
	secretMark  = "[secret]"
)

var marks = [...]string{urlMark, hostMark, addressMark, emailMark, secretMark}

// Text returns s with every URL, host name, IP address (v4, v6, with or
// without port, in brackets), e-mail address and key-like string replaced by
// a placeholder: "[url]", "[host]", "[address]", "[email]", "[secret]".
// Everything else is kept as it is (invalid UTF-8 becomes U+FFFD).
func Text(s string) string {
	return redact(strings.ToValidUTF8(s, "\uFFFD"), 0)
}

// Clean reports whether Text(s) == s (nothing to remove).
func Clean(s string) bool { return Text(s) == s }

// redact scans s, which follows the byte prev (0: nothing).
func redact(s string, prev byte) string {
	sc := scanner{s: s, prev: prev}
	return sc.run()
}

// scanner walks s left to right. At each position it tries the matchers in
// a fixed order; the first that matches replaces what it matched, otherwise
// the byte is kept. Every matcher needs a left boundary: prev, the last byte
// written out (so a placeholder's ']' counts as a boundary, and a second
// pass over the output sees the same left context as the first).
//
// The memos make the scan linear: a matcher that fails at i after reading a
// run up to m would fail at every start in (i, m) too (the same run, the
// same end), so it is not tried there again.
type scanner struct {
	s    string
	prev byte
	b    strings.Builder

	urlMemo, kvMemo, emailMemo, hostMemo, jwtMemo, blobMemo int
	// quoteFrom[k], quoteTo[k]: a search for the closing quote of kind k
	// (see closeQuote) from quoteFrom found none before quoteTo.
	quoteFrom, quoteTo [4]int
}

func (sc *scanner) run() string {
	s := sc.s
	lit, changed := 0, false
	for i := 0; i < len(s); {
		end, repl := sc.match(i)
		switch {
		case end < 0:
			sc.prev = s[i]
			i++
		case repl == "": // a placeholder already: kept
			sc.prev = s[end-1]
			i = end
		default:
			if !changed {
				sc.b.Grow(len(s))
				changed = true
			}
			sc.b.WriteString(s[lit:i])
			sc.b.WriteString(repl)
			sc.prev = repl[len(repl)-1]
			i, lit = end, end
		}
	}
	if !changed {
		return s
	}
	sc.b.WriteString(s[lit:])
	return sc.b.String()
}

// match tries the matchers at i: it returns where the match ends and its
// replacement ("" to keep it), or -1.
func (sc *scanner) match(i int) (int, string) {
	s := sc.s
	if s[i] >= utf8.RuneSelf {
		return -1, ""
	}
	if s[i] == '[' {
		if m := markAt(s, i); m != "" {
			return i + len(m), ""
		}
		if end, ok := bracketV6At(s, i); ok {
			return suffix(s, end, addressMark, true)
		}
		return -1, ""
	}
	if end, ok := sc.url(i); ok {
		return end, urlMark
	}
	if end, repl, ok := sc.keyValue(i); ok {
		return end, repl
	}
	if end, repl, ok := bearerAt(s, i, sc.prev); ok {
		return end, repl
	}
	if end, ok := sc.email(i); ok {
		return end, emailMark
	}
	if end, ok := sc.prefixed(i); ok {
		return end, secretMark
	}
	if end, ok := v6At(s, i, sc.prev); ok {
		return suffix(s, end, addressMark, true)
	}
	if end, ok := sc.host(i); ok {
		return suffix(s, end, hostMark, false)
	}
	if end, ok := v4At(s, i, sc.prev); ok {
		return suffix(s, end, addressMark, true)
	}
	if end, ok := sc.blob(i); ok {
		return end, secretMark
	}
	return -1, ""
}

// markAt returns the placeholder at s[i:], or "".
func markAt(s string, i int) string {
	for _, m := range marks {
		if strings.HasPrefix(s[i:], m) {
			return m
		}
	}
	return ""
}

func isMark(s string) bool {
	for _, m := range marks {
		if s == m {
			return true
		}
	}
	return false
}

// suffix extends a host or address ending at end by a :port, and, when a
// /path follows, makes it a URL; an address (ip) takes a /prefix length.
func suffix(s string, end int, mark string, ip bool) (int, string) {
	if end < len(s) && s[end] == ':' {
		j := end + 1
		for j < len(s) && j-end <= 6 && isDigit(s[j]) {
			j++
		}
		if d := j - end - 1; d >= 1 && d <= 5 && (j == len(s) || !isWord(s[j])) {
			end = j
		}
	}
	if end < len(s) && s[end] == '/' {
		pe := urlBody(s, end)
		if ip {
			j := end + 1
			for j < len(s) && j-end <= 4 && isDigit(s[j]) {
				j++
			}
			if d := j - end - 1; d >= 1 && d <= 3 && pe == j {
				return j, mark
			}
		}
		if pe > end {
			return pe, urlMark
		}
	}
	return end, mark
}

// url matches scheme://body.
func (sc *scanner) url(i int) (int, bool) {
	s := sc.s
	if i < sc.urlMemo || !isScheme(s[i]) || isScheme(sc.prev) {
		return 0, false
	}
	e := i
	for e < len(s) && isScheme(s[e]) {
		e++
	}
	if strings.HasPrefix(s[e:], "://") {
		if end := urlBody(s, e+3); end > e+3 {
			return end, true
		}
	}
	sc.urlMemo = e
	return 0, false
}

// urlBody returns the end of a URL's body starting at k: up to whitespace, a
// quote, < or >, or a closing ), ] or } that no opening one in the body
// balances; trailing punctuation is left out.
func urlBody(s string, k int) int {
	var paren, brack, brace int
	j := k
loop:
	for j < len(s) {
		c := s[j]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[j:])
			if unicode.IsSpace(r) {
				break
			}
			j += size
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r', '\v', '\f', '"', '\'', '`', '<', '>':
			break loop
		case '(':
			paren++
		case '[':
			brack++
		case '{':
			brace++
		case ')':
			if paren == 0 {
				break loop
			}
			paren--
		case ']':
			if brack == 0 {
				break loop
			}
			brack--
		case '}':
			if brace == 0 {
				break loop
			}
			brace--
		}
		j++
	}
	for j > k && strings.IndexByte(".,;:!?", s[j-1]) >= 0 {
		j--
	}
	return j
}

// keywords end the names whose values are secrets.
var keywords = [...]string{
	"apikey", "password", "passwd", "passphrase", "secret", "token",
	"credentials", "credential", "pwd", "key",
}

// keyName reports whether name ends in a keyword that starts the name or a
// segment of it (after - _ . or a lower-case letter or digit when the keyword
// is capitalised: api_key, X-Api-Key, apiKey, but not monkey). If not, first
// is where the first keyword ending the name starts (len(name): none).
func keyName(name string) (ok bool, first int) {
	first = len(name)
	for _, kw := range keywords {
		ks := len(name) - len(kw)
		if ks < 0 || !strings.EqualFold(name[ks:], kw) {
			continue
		}
		if ks == 0 {
			return true, 0
		}
		c := name[ks-1]
		if c == '-' || c == '_' || c == '.' || isUpper(name[ks]) && (isLower(c) || isDigit(c)) {
			return true, ks
		}
		first = min(first, ks)
	}
	return false, first
}

// keyValue matches name=value or name: value (blanks and quotes allowed
// around them) for a key-like name and replaces the value. The name is
// redacted as text of its own (db.example.com.password=...).
func (sc *scanner) keyValue(i int) (int, string, bool) {
	s := sc.s
	if i < sc.kvMemo || !isName(s[i]) || isName(sc.prev) {
		return 0, "", false
	}
	e := i
	for e < len(s) && isName(s[e]) {
		e++
	}
	if ok, first := keyName(s[i:e]); !ok {
		sc.kvMemo = i + first
		return 0, "", false
	}
	fail := func() (int, string, bool) {
		sc.kvMemo = e
		return 0, "", false
	}
	j := e
	if j+1 < len(s) && s[j] == '\\' && isQuote(s[j+1]) {
		j += 2
	} else if j < len(s) && isQuote(s[j]) {
		j++
	}
	j = skipBlank(s, j)
	if j >= len(s) || s[j] != '=' && s[j] != ':' {
		return fail()
	}
	if s[j] == ':' && sc.prev == '/' {
		// A path's last element: open /run/secrets/token: no such file.
		// (No memo: after a placeholder the name may be a key's.)
		return 0, "", false
	}
	j++
	if s[j-1] == '=' && j < len(s) && s[j] == '=' { // ==: a comparison
		return fail()
	}
	j = skipBlank(s, j)
	if _, _, ok := bearerAt(s, j, s[j-1]); ok { // Bearer matches it
		return fail()
	}
	vs, ve, keep, ok := sc.kvValue(j)
	if !ok {
		return fail()
	}
	val := secretMark
	if keep {
		val = s[vs:ve]
	}
	return ve, redact(s[i:e], sc.prev) + s[e:vs] + val, true
}

// kvValue finds the value at j: a placeholder (kept), a quoted string
// ('...', "..." or \"...\", to the end of the line if unclosed; kept if it
// holds just a placeholder) or a run of valueRun.
func (sc *scanner) kvValue(j int) (vs, ve int, keep, ok bool) {
	s := sc.s
	if j >= len(s) {
		return 0, 0, false, false
	}
	if m := markAt(s, j); m != "" {
		return j, j + len(m), true, true
	}
	open := 0
	var q byte
	if isQuote(s[j]) {
		open, q = 1, s[j]
	} else if s[j] == '\\' && j+1 < len(s) && isQuote(s[j+1]) {
		open, q = 2, s[j+1]
	}
	if open > 0 {
		cs := j + open
		if end, found := sc.closeQuote(cs, q, open == 2); found {
			if end == cs {
				return 0, 0, false, false
			}
			return cs, end, isMark(s[cs:end]), true
		}
		// Unclosed: the rest of the line. (Taking just a run would depend on
		// whether a closing quote is escaped, and the backslash may go with
		// a URL: Text would not be idempotent.)
		end := cs
		for end < len(s) && s[end] != '\n' && s[end] != '\r' {
			end++
		}
		for end > cs && (s[end-1] == ' ' || s[end-1] == '\t') {
			end--
		}
		if end == cs {
			return 0, 0, false, false
		}
		return cs, end, isMark(s[cs:end]), true
	}
	ve = trimPunct(s, j, valueRun(s, j))
	if ve == j {
		return 0, 0, false, false
	}
	return j, ve, false, true
}

// closeQuote finds, on the line from k, the closing quote q: one not after a
// backslash, or the sequence \q when escaped.
func (sc *scanner) closeQuote(k int, q byte, escaped bool) (int, bool) {
	s := sc.s
	memo := 0
	if q == '\'' {
		memo = 1
	}
	if escaped {
		memo += 2
	}
	if sc.quoteFrom[memo] <= k && k < sc.quoteTo[memo] {
		return 0, false
	}
	for j := k; j < len(s); j++ {
		switch c := s[j]; {
		case c == '\n' || c == '\r':
			sc.quoteFrom[memo], sc.quoteTo[memo] = k, j
			return 0, false
		case escaped && c == '\\' && j+1 < len(s) && s[j+1] == q:
			return j, true
		case !escaped && c == q && s[j-1] != '\\':
			return j, true
		}
	}
	sc.quoteFrom[memo], sc.quoteTo[memo] = k, len(s)
	return 0, false
}

// valueRun returns the end of a value or token from k: up to whitespace, a
// quote or one of , ; & ) ] } < >.
func valueRun(s string, k int) int {
	j := k
	for j < len(s) {
		c := s[j]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[j:])
			if unicode.IsSpace(r) {
				break
			}
			j += size
			continue
		}
		if strings.IndexByte(" \t\n\r\v\f\"'`,;&)]}<>", c) >= 0 {
			break
		}
		j++
	}
	return j
}

// trimPunct leaves trailing . : ! ? out of s[k:j].
func trimPunct(s string, k, j int) int {
	for j > k && strings.IndexByte(".:!?", s[j-1]) >= 0 {
		j--
	}
	return j
}

// bearerAt matches "Bearer <token>" or "Basic <base64>" (any case) at i,
// after prev, and replaces the credential: a Bearer token of fewer than 8
// letters only (bearer token) and a Basic one that does not look like base64
// (basic auth) are prose.
func bearerAt(s string, i int, prev byte) (int, string, bool) {
	if i >= len(s) || isWord(prev) {
		return 0, "", false
	}
	var kw int
	switch {
	case hasPrefixFold(s[i:], "bearer"):
		kw = 6
	case hasPrefixFold(s[i:], "basic"):
		kw = 5
	default:
		return 0, "", false
	}
	k := skipBlank(s, i+kw)
	if k == i+kw || k >= len(s) {
		return 0, "", false
	}
	if m := markAt(s, k); m != "" {
		return k + len(m), s[i:k] + m, true
	}
	te := trimPunct(s, k, valueRun(s, k))
	tok := s[k:te]
	switch {
	case tok == "":
		return 0, "", false
	case kw == 5 && !base64ish(tok):
		return 0, "", false
	case kw == 6 && len(tok) < 8 && allLetters(tok):
		return 0, "", false
	}
	return te, s[i:k] + secretMark, true
}

// base64ish: at least 8 base64 characters, with a digit, + / = or a capital
// after the first letter (so Basic Authentication stays).
func base64ish(t string) bool {
	if len(t) < 8 {
		return false
	}
	mixed := false
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case isLower(c):
		case isUpper(c):
			mixed = mixed || i > 0
		case isDigit(c) || c == '+' || c == '/' || c == '=':
			mixed = true
		default:
			return false
		}
	}
	return mixed
}

func allLetters(t string) bool {
	for i := 0; i < len(t); i++ {
		if !isAlpha(t[i]) {
			return false
		}
	}
	return true
}

// email matches local@host.
func (sc *scanner) email(i int) (int, bool) {
	s := sc.s
	if i < sc.emailMemo || !isLocal(s[i]) || isLocal(sc.prev) {
		return 0, false
	}
	e := i
	for e < len(s) && isLocal(s[e]) {
		e++
	}
	if e+1 < len(s) && s[e] == '@' {
		if end, _, ok := hostAt(s, e+1); ok {
			return end, true
		}
	}
	sc.emailMemo = e
	return 0, false
}

// prefixes start well-known API keys and tokens; at least 3 token characters
// (or * of a masked key) must follow.
var prefixes = [...]string{
	"sk-", "sk_live_", "sk_test_", "pk_live_", "pk_test_", "rk_live_", "rk_test_",
	"whsec_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
	"xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xapp-", "AIza", "hf_",
}

// prefixed matches a key with a well-known prefix, an AWS access key id
// (AKIA or ASIA and 16 capitals or digits) or a JWT (eyJ..., two or three
// dot-separated segments).
func (sc *scanner) prefixed(i int) (int, bool) {
	s := sc.s
	if isAlnum(sc.prev) || strings.IndexByte("sprwgxAhe", s[i]) < 0 {
		return 0, false
	}
	rest := s[i:]
	if strings.HasPrefix(rest, "eyJ") {
		if i < sc.jwtMemo {
			return 0, false
		}
		e1 := tokenRun(s, i)
		if e1 < len(s) && s[e1] == '.' {
			if e2 := tokenRun(s, e1+1); e2 > e1+1 {
				if e2 < len(s) && s[e2] == '.' {
					if e3 := tokenRun(s, e2+1); e3 > e2+1 {
						return e3, true
					}
				}
				return e2, true
			}
		}
		sc.jwtMemo = e1
		return 0, false
	}
	if strings.HasPrefix(rest, "AKIA") || strings.HasPrefix(rest, "ASIA") {
		j := i + 4
		for j < len(s) && j-i < 20 && (isUpper(s[j]) || isDigit(s[j])) {
			j++
		}
		if j-i == 20 && (j == len(s) || !isToken(s[j])) {
			return j, true
		}
		return 0, false
	}
	for _, p := range prefixes {
		if strings.HasPrefix(rest, p) {
			j := i + len(p)
			for j < len(s) && (isToken(s[j]) || s[j] == '*') { // sk-...****abcd
				j++
			}
			if j-i-len(p) >= 3 {
				return j, true
			}
		}
	}
	return 0, false
}

func tokenRun(s string, k int) int {
	for k < len(s) && isToken(s[k]) {
		k++
	}
	return k
}

// maxV6 bounds an IPv6 address (45 characters at most, without zone).
const maxV6 = 64

// bracketV6At matches [ipv6] or [ipv6%zone].
func bracketV6At(s string, i int) (int, bool) {
	j := i + 1
	for j < len(s) && j-i <= 2*maxV6 && s[j] != ']' {
		if c := s[j]; !isWord(c) && c != ':' && c != '.' && c != '-' && c != '%' {
			return 0, false
		}
		j++
	}
	if j >= len(s) || s[j] != ']' || !v6OK(s[i+1:j]) {
		return 0, false
	}
	return j + 1, true
}

// v6At matches a bare IPv6 address (with zone). The run of hex digits,
// colons and dots from i is cut at the longest prefix netip accepts that
// ends before or after a colon or dot, or at the run's end when no letter,
// digit or _ follows. Cutting next to separators keeps the choice stable
// when something after a separator is replaced: fe80::1.2.3.4.5 →
// [address].5.
func v6At(s string, i int, prev byte) (int, bool) {
	c := s[i]
	if !isHex(c) && c != ':' || isWord(prev) || prev == ':' || prev == '.' {
		return 0, false
	}
	n := i
	for n < len(s) && n-i <= maxV6 && isV6(s[n]) {
		n++
	}
	long := n-i > maxV6
	for p := min(n, i+maxV6); p > i; p-- {
		cut := isSep(s[p-1]) || p < n && isSep(s[p])
		if p == n && !long && n < len(s) && s[n] == '%' && v6OK(s[i:n]) {
			// A zone: as long as it goes (it cannot make the address
			// invalid), without a trailing dot.
			z := n + 1
			for z < len(s) && isZone(s[z]) {
				z++
			}
			for z > n+1 && s[z-1] == '.' {
				z--
			}
			if z > n+1 {
				return z, true
			}
			return n, true
		}
		if p == n && !long {
			if !cut && n < len(s) && isWord(s[n]) {
				continue
			}
		} else if !cut {
			continue
		}
		if v6OK(s[i:p]) {
			return p, true
		}
	}
	return 0, false
}

// v6OK reports whether a is an IPv6 address with two colons or more and a hex
// digit (not just ::).
func v6OK(a string) bool {
	if strings.Count(a, ":") < 2 || strings.IndexFunc(a, func(r rune) bool { return r < utf8.RuneSelf && isHex(byte(r)) }) < 0 {
		return false
	}
	ip, err := netip.ParseAddr(a)
	return err == nil && ip.Is6()
}

// v4At matches a dotted quad of 1 to 3 digit numbers up to 255 (leading
// zeros allowed), not inside a word.
func v4At(s string, i int, prev byte) (int, bool) {
	if !isDigit(s[i]) || isWord(prev) {
		return 0, false
	}
	j := i
	for k := 0; k < 4; k++ {
		if k > 0 {
			if j >= len(s) || s[j] != '.' {
				return 0, false
			}
			j++
		}
		d, v := 0, 0
		for j < len(s) && isDigit(s[j]) && d < 4 {
			v = v*10 + int(s[j]-'0')
			j++
			d++
		}
		if d == 0 || d > 3 || v > 255 {
			return 0, false
		}
	}
	if j < len(s) && isWord(s[j]) {
		return 0, false
	}
	return j, true
}

// host matches a host name at i.
func (sc *scanner) host(i int) (int, bool) {
	s := sc.s
	if !isWord(s[i]) || isLabel(sc.prev) || sc.prev == '.' {
		return 0, false
	}
	if i < sc.hostMemo {
		// Inside a run where no two labels end alphabetic: only localhost.
		return localhostAt(s, i)
	}
	end, runEnd, ok := hostAt(s, i)
	if !ok {
		sc.hostMemo = runEnd
	}
	return end, ok
}

// hostAt returns the end of the longest host name at k: labels separated by
// single dots whose last is alphabetic (2 letters or more), or localhost;
// runEnd is where the labels end.
func hostAt(s string, k int) (end, runEnd int, ok bool) {
	if k >= len(s) || !isWord(s[k]) {
		return 0, k, false
	}
	j, n := k, 0
	for {
		ls := j
		for j < len(s) && isLabel(s[j]) {
			j++
		}
		n++
		label := s[ls:j]
		if n == 1 && strings.EqualFold(label, "localhost") || n > 1 && alphaLabel(label) {
			end, ok = j, true
		}
		if j+1 < len(s) && s[j] == '.' && isLabel(s[j+1]) {
			j++
			continue
		}
		return end, j, ok
	}
}

func localhostAt(s string, i int) (int, bool) {
	j := i + len("localhost")
	if j <= len(s) && strings.EqualFold(s[i:j], "localhost") && (j == len(s) || !isLabel(s[j])) {
		return j, true
	}
	return 0, false
}

func alphaLabel(l string) bool { return len(l) >= 2 && allLetters(l) }

// blob matches a token-like run: 24 or more of [A-Za-z0-9_-+/=] with a
// letter and a digit.
func (sc *scanner) blob(i int) (int, bool) {
	s := sc.s
	if i < sc.blobMemo || !isBlob(s[i]) || isBlob(sc.prev) {
		return 0, false
	}
	e := i
	letter, digit := false, false
	for e < len(s) && isBlob(s[e]) {
		letter = letter || isAlpha(s[e])
		digit = digit || isDigit(s[e])
		e++
	}
	if e-i >= 24 && letter && digit {
		return e, true
	}
	sc.blobMemo = e
	return 0, false
}

func skipBlank(s string, j int) int {
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	return j
}

func hasPrefixFold(s, p string) bool { return len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) }

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isUpper(c byte) bool  { return 'A' <= c && c <= 'Z' }
func isLower(c byte) bool  { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool  { return isUpper(c) || isLower(c) }
func isAlnum(c byte) bool  { return isAlpha(c) || isDigit(c) }
func isWord(c byte) bool   { return isAlnum(c) || c == '_' }
func isLabel(c byte) bool  { return isWord(c) || c == '-' }
func isToken(c byte) bool  { return isLabel(c) }
func isName(c byte) bool   { return isLabel(c) || c == '.' }
func isZone(c byte) bool   { return isName(c) }
func isScheme(c byte) bool { return isAlnum(c) || c == '+' || c == '.' || c == '-' }
func isLocal(c byte) bool  { return isName(c) || c == '%' || c == '+' }
func isBlob(c byte) bool   { return isToken(c) || c == '+' || c == '/' || c == '=' }
func isHex(c byte) bool    { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
func isSep(c byte) bool    { return c == ':' || c == '.' }
func isV6(c byte) bool     { return isHex(c) || isSep(c) }
func isQuote(c byte) bool  { return c == '"' || c == '\'' }
