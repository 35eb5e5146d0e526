package redact

import (
	"net/netip"
	"regexp"
	"testing"
	"unicode/utf8"
)

// quad is what an IPv4 address looks like in text.
var quad = regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}\b`)

func FuzzText(f *testing.F) {
	for _, c := range cases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Text(s)
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Text(%q): got %q, want valid UTF-8", s, got)
		}
		if again := Text(got); again != got {
			t.Fatalf("Text(%q): got %q, then Text(%q): got %q, want it unchanged", s, got, got, again)
		}
		if !Clean(got) {
			t.Fatalf("Clean(Text(%q)) = Clean(%q): got false, want true", s, got)
		}
		for _, m := range quad.FindAllString(got, -1) {
			if _, err := netip.ParseAddr(m); err == nil {
				t.Fatalf("Text(%q): got %q, want no IPv4 address (%s) in it", s, got, m)
			}
		}
	})
}
