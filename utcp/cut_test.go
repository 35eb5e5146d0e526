package utcp

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, c := range []struct {
		name        string
		s           string
		n           int
		runes, word string
	}{
		{"short", "ab cd", 5, "ab cd", "ab cd"},
		{"at a space", "ab cd", 2, "ab", "ab"},
		{"a word that ends at n stays", "ab cd ef", 5, "ab cd", "ab cd"},
		{"inside a word", "ab cdef", 5, "ab cd", "ab"},
		{"a tab or line break ends a word too", "ab\tcd\nef", 6, "ab\tcd\n", "ab\tcd"},
		{"no space: at a rune's start", "aé", 2, "a", "a"},
		{"text without spaces", "日本語", 7, "日本", "日本"},
		{"nothing fits", "日本", 1, "", ""},
		{"zero", "abc", 0, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := CutRunes(c.s, c.n); got != c.runes {
				t.Errorf("CutRunes(%q, %d) = %q, want %q", c.s, c.n, got, c.runes)
			}
			if got := CutWords(c.s, c.n); got != c.word {
				t.Errorf("CutWords(%q, %d) = %q, want %q", c.s, c.n, got, c.word)
			}
		})
	}
}

func FuzzCut(f *testing.F) {
	f.Add("ab cd ef", 4)
	f.Add("日本 語", 4)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 2*len(s)+1 {
			return
		}
		for _, got := range []string{CutRunes(s, n), CutWords(s, n)} {
			if len(got) > n || !strings.HasPrefix(s, got) {
				t.Fatalf("cut of %q at %d: %q", s, n, got)
			}
			if utf8.ValidString(s) && !utf8.ValidString(got) {
				t.Fatalf("cut of %q at %d split a rune: %q", s, n, got)
			}
		}
	})
}
