package agent

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The bounds of the error results the loop writes. The model chooses how
// many calls fail and what they name, the client how many tools a turn
// declares: what one error result holds must not grow with either.
const (
	// MaxErrorBytes bounds the text of an error result ErrorResult makes,
	// in bytes (before JSON escaping): a longer text is cut, on a rune
	// boundary, and ends saying how much was left out.
	MaxErrorBytes = 2 << 10
	// MaxToolsNamed bounds the tool names a missing tool's error result
	// gives: the closest to the name called (by edit distance and prefix),
	// or the first declared when none is close, then how many more there
	// are.
	MaxToolsNamed = 8
	// MaxNameBytes bounds the bytes of a tool name an error result quotes,
	// and compares when it looks for the closest: longer names are cut
	// (OpenAI's tool names are at most 64 characters).
	MaxNameBytes = 64
	// maxToolsCompared bounds the tools a missing tool's name is compared
	// with, in declaration order (OpenAI takes at most 128 in a request).
	maxToolsCompared = 4096
	// maxEditDistance is how far (in byte edits, ignoring ASCII case) a
	// name may be from the one called to count as close.
	maxEditDistance = 3
	// minPrefix is the shortest common prefix for which a name counts as
	// close when one of the two names begins with the other.
	minPrefix = 3
)

// cutText cuts s to at most max bytes, on a rune boundary, ending with
// how many bytes were left out.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	suffix := func(n int) string { return " … (" + strconv.Itoa(n) + " more bytes)" }
	keep := max - len(suffix(len(s)))
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + suffix(len(s)-keep)
}

// cutName is name cut to MaxNameBytes, on a rune boundary, with "…"
// when it was longer.
func cutName(name string) string {
	if len(name) <= MaxNameBytes {
		return name
	}
	keep := MaxNameBytes
	for keep > 0 && !utf8.RuneStart(name[keep]) {
		keep--
	}
	return name[:keep] + "…"
}

// quoteName is a tool name for an error text: quoted, cut to
// MaxNameBytes.
func quoteName(name string) string { return strconv.Quote(cutName(name)) }

// missingToolMessage says there is no tool name among names (the step's,
// in order), naming at most MaxToolsNamed of them: all when there are no
// more, else the closest to name, else the first.
func missingToolMessage(name string, names []string) string {
	q := quoteName(name)
	switch {
	case len(names) == 0:
		return fmt.Sprintf("there is no tool %s, and no tools are available", q)
	case len(names) <= MaxToolsNamed:
		return fmt.Sprintf("there is no tool %s; the tools are: %s", q, joinNames(names))
	}
	if close := closest(name, names); len(close) > 0 {
		return fmt.Sprintf("there is no tool %s; the closest of the %d tools: %s", q, len(names), joinNames(close))
	}
	return fmt.Sprintf("there is no tool %s; the tools are: %s and %d more", q, joinNames(names[:MaxToolsNamed]), len(names)-MaxToolsNamed)
}

// listNames is names joined for an error text, at most MaxToolsNamed of
// them, each cut, then how many more there are.
func listNames(names []string) string {
	if len(names) <= MaxToolsNamed {
		return joinNames(names)
	}
	return fmt.Sprintf("%s and %d more", joinNames(names[:MaxToolsNamed]), len(names)-MaxToolsNamed)
}

func joinNames(names []string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(cutName(n))
	}
	return b.String()
}

// closest are the names close to name (at most MaxToolsNamed, the closest
// first, then in declaration order), among the first maxToolsCompared.
// Names are compared by their first MaxNameBytes, ignoring ASCII case: a
// name is close when at most maxEditDistance edits away, or when one of
// the two begins with the other and the shorter is at least minPrefix
// long. The work is bounded: at most maxToolsCompared comparisons of
// MaxNameBytes by 2*maxEditDistance+1 cells.
func closest(name string, names []string) []string {
	type scored struct {
		i, d int
	}
	a := foldName(nil, name)
	var found []scored
	var b []byte
	for i, n := range names[:min(len(names), maxToolsCompared)] {
		b = foldName(b[:0], n)
		d := editDistance(a, b, maxEditDistance)
		if d > maxEditDistance && prefixed(a, b) {
			d = maxEditDistance + 1 // after the near ones
		} else if d > maxEditDistance {
			continue
		}
		found = append(found, scored{i, d})
	}
	slices.SortStableFunc(found, func(x, y scored) int { return x.d - y.d })
	out := make([]string, 0, min(len(found), MaxToolsNamed))
	for _, f := range found[:min(len(found), MaxToolsNamed)] {
		out = append(out, names[f.i])
	}
	return out
}

// foldName appends to dst the first MaxNameBytes of name, ASCII letters
// in lower case.
func foldName(dst []byte, name string) []byte {
	for i := 0; i < len(name) && i < MaxNameBytes; i++ {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func prefixed(a, b []byte) bool {
	short, long := a, b
	if len(short) > len(long) {
		short, long = long, short
	}
	return len(short) >= minPrefix && string(long[:len(short)]) == string(short)
}

// editDistance is the Levenshtein distance of a and b in bytes when it
// is at most k, else k+1; only the band of cells within k of the
// diagonal is computed.
func editDistance(a, b []byte, k int) int {
	if d := len(a) - len(b); d > k || -d > k {
		return k + 1
	}
	inf := k + 1
	var rows [2][MaxNameBytes + 1]int // names are compared cut to MaxNameBytes: no allocation
	var prev, cur []int
	if len(b) <= MaxNameBytes {
		prev, cur = rows[0][:len(b)+1], rows[1][:len(b)+1]
	} else {
		prev, cur = make([]int, len(b)+1), make([]int, len(b)+1)
	}
	for j := range prev {
		prev[j] = min(j, inf)
	}
	for i := 1; i <= len(a); i++ {
		lo, hi := max(1, i-k), min(len(b), i+k)
		if lo > 1 {
			cur[lo-1] = inf
		} else {
			cur[0] = min(i, inf)
		}
		best := cur[lo-1]
		for j := lo; j <= hi; j++ {
			d := prev[j-1]
			if a[i-1] != b[j-1] {
				d++
			}
			d = min(d, prev[j]+1, cur[j-1]+1, inf) // prev[hi] is inf past row i-1's band
			cur[j] = d
			best = min(best, d)
		}
		if hi < len(b) {
			cur[hi+1] = inf
		}
		if best > k {
			return inf
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], inf)
}
