package search

import (
	"strings"
	"testing"
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
	if want := "get User HTTP Server v2 list items customer s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
