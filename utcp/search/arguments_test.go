package search

import (
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

func TestSplitArguments(t *testing.T) {
	for _, c := range []struct{ name, query, intent, args string }{
		{"words only", "list my repositories", "list my repositories", ""},
		{"a path with a hyphen", "rename the master branch of octo-org/billing-service", "rename the master branch of", "octo-org/billing-service"},
		{"a path of plain words stays words", "star vuejs/core", "star vuejs/core", ""},
		{"a slash between words", "read/write or admin?", "read/write or admin?", ""},
		{"single quotes", "Title it 'Login button broken' please", "Title it please", "'Login button broken'"},
		{"double quotes", `say "hello world" twice`, "say twice", `"hello world"`},
		{"typographic quotes", "say “hi” now", "say now", "“hi”"},
		{"a quotation opening inside a word's run", `set title="Login broken" now`, "set title= now", `"Login broken"`},
		{"a quotation in brackets", `find ("exact phrase") here`, "find ( ) here", `"exact phrase"`},
		{"apostrophes open nothing", "don't drop Sam's comment", "don't drop Sam's comment", ""},
		{"an unclosed quote", "an 'unclosed quote", "an 'unclosed quote", ""},
		{"a phone number", "call +44 20 7946 0958 now", "call now", "+44 20 7946 0958"},
		{"identifiers", "fetch call CA5f1e2d3c4b and message MM800f44", "fetch call and message", "CA5f1e2d3c4b MM800f44"},
		{"short letter-digit words are words", "convert the m4a and mp3 files, message MM80", "convert the m4a and mp3 files, message MM80", ""},
		{"names with a few digits are words", "encode as base64 with sha256 in python3 over OAuth2", "encode as base64 with sha256 in python3 over OAuth2", ""},
		{"URLs, addresses and handles", "post to https://example.com/hook or ops@acme.com or @octocat", "post to or or", "https://example.com/hook ops@acme.com @octocat"},
		{"a number sign", "lock issue #482, it's heated", "lock issue it's heated", "#482,"},
		{"file names and branches", "open notes.txt from release/3.0", "open from", "notes.txt release/3.0"},
		{"abbreviations are words", "e.g. U.S. users", "e.g. U.S. users", ""},
		{"a sentence's full stop", "end of sentence.", "end of sentence.", ""},
		{"nothing", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			intent, args := splitArguments(c.query)
			if strings.Join(strings.Fields(intent), " ") != c.intent || strings.TrimSpace(args) != c.args {
				t.Errorf("splitArguments(%q) = %q, %q; want %q, %q", c.query, intent, args, c.intent, c.args)
			}
		})
	}
}

// TestArgumentsWeighed: a repository's name in a request counts less than
// what the request asks for.
func TestArgumentsWeighed(t *testing.T) {
	terms, err := New().queryTerms("rename the branch of octo-org/billing-service")
	if err != nil {
		t.Fatal(err)
	}
	weights := map[string]float64{}
	for _, qt := range terms {
		weights[qt.term] = qt.weight
	}
	if weights["renam"] != 1 || weights["branch"] != 1 || !(weights["bill"] > 0 && weights["bill"] < 1) || weights["octo"] != weights["bill"] {
		t.Errorf("weights %v: want the words 1 and the repository's name's less", weights)
	}
}

// FuzzSplitArguments: any text splits without panicking into an intent no
// longer than the text (each value replaced by a space) and values that
// come from the text.
func FuzzSplitArguments(f *testing.F) {
	for _, s := range []string{"rename octo-org/x 'quoted text' now", "“a” ‘b’ «c» `d`", "'", "\"\"", "a'b'c", "\xff'\xfe'", `x="y z"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		intent, args := splitArguments(q)
		if len(intent) > len(q) {
			t.Fatalf("intent %q longer than %q", intent, q)
		}
		for _, w := range strings.Fields(args) {
			if !strings.Contains(q, w) {
				t.Fatalf("value %q is not in %q", w, q)
			}
		}
	})
}

// BenchmarkSplitArgumentsUnclosed: a query of the longest length made of
// quotes that never close is read once (about 0.1 ms), not once a quote
// (4.2 ms before each mark remembered it found no closing).
func BenchmarkSplitArgumentsUnclosed(b *testing.B) {
	for _, q := range []string{strings.Repeat(`"a `, utcp.MaxQueryBytes/3), strings.Repeat(`x="a `, utcp.MaxQueryBytes/5)} {
		if _, args := splitArguments(q); args != "" {
			b.Fatalf("values %q in a query of unclosed quotes", args)
		}
	}
	q := strings.Repeat(`x="a `, utcp.MaxQueryBytes/5)
	for b.Loop() {
		splitArguments(q)
	}
}
