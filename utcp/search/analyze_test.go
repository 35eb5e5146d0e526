package search

import (
	"fmt"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

func TestStem(t *testing.T) {
	t.Parallel()
	groups := [][]string{
		{"order", "orders", "ordered", "ordering"},
		{"create", "created", "creating", "creates"},
		{"category", "categories"},
		{"search", "searches", "searching"},
		{"ship", "shipped", "shipping"},
		{"delete", "deleted", "deletes"},
	}
	for _, g := range groups {
		want := stem(g[0])
		for _, w := range g[1:] {
			if got := stem(w); got != want {
				t.Errorf("stem(%q): got %q, want %q (as stem(%q))", w, got, want, g[0])
			}
		}
	}
	// maxStemLen: a word of 64 bytes is stemmed, one of 65 is left alone.
	if w := strings.Repeat("a", maxStemLen-len("orders")) + "orders"; stem(w) != strings.TrimSuffix(w, "s") {
		t.Errorf("stem(%q) (%d bytes): got %q, want it stemmed", w, len(w), stem(w))
	}
	if w := strings.Repeat("a", maxStemLen+1-len("orders")) + "orders"; stem(w) != w {
		t.Errorf("stem(%q) (%d bytes): got %q, want it unchanged", w, len(w), stem(w))
	}
	for _, w := range []string{"status", "address", "bus", "größe", strings.Repeat("orders", 11)} {
		if got := stem(w); got != w {
			t.Errorf("stem(%q): got %q, want it unchanged", w, got)
		}
	}
}

func TestSplitWords(t *testing.T) {
	t.Parallel()
	got := strings.Join(splitWords("getUserHTTPServer_v2.list-items customer's"), " ")
	if want := "get User HTTP Server v2 list items customer"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// A contraction's tail is no word; a negated auxiliary is none at all;
	// an apostrophe before anything else splits.
	got = strings.Join(splitWords("it's we’re I'd they'll I'm you've don't WON'T shouldn’t o'brien rock'n'roll users' 'twas"), " ")
	if want := "it we I they I you o brien rock n roll users twas"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestTrimQueryContractions: the tails of contractions and the negated
// auxiliaries are no terms to TrimQuery either, so a prompt of them is
// not cut short of the terms the search reads.
func TestTrimQueryContractions(t *testing.T) {
	t.Parallel()
	var words []string
	for i := range utcp.MaxQueryTerms {
		words = append(words, fmt.Sprintf("term%d don't it's", i))
	}
	q := strings.Join(words, " ")
	if got := TrimQuery(q); got != q {
		t.Errorf("cut to %d of %d bytes", len(got), len(q))
	}
	if n := distinctTerms(q + " another"); n != utcp.MaxQueryTerms+1 {
		t.Errorf("%d terms, want %d", n, utcp.MaxQueryTerms+1)
	}
	if got := TrimQuery(q + " another"); got != q+" " {
		t.Errorf("got %q, want the prompt less its last word", got)
	}
}
