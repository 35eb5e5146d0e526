package utcp

import (
	"strings"
	"unicode/utf8"
)

// CutRunes is s cut to at most n bytes, at a rune's start.
func CutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// CutWords is s cut to at most n bytes at a word's end: before the last
// space, tab or line break in its first n+1 bytes (a word that ends at
// byte n stays), else, in text with none, at a rune's start.
func CutWords(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if sp := strings.LastIndexAny(s[:n+1], " \t\r\n"); sp > 0 {
		return s[:sp]
	}
	return CutRunes(s, n)
}
