package search

import (
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

func TestSplitArguments(t *testing.T) {
	for _, c := range []struct{ query, intent, args string }{
		{"list my repositories", "list my repositories", ""},
		{"rename the master branch of octo-org/billing-service", "rename the master branch of", "octo-org/billing-service"},
		{"star vuejs/core", "star vuejs/core", ""}, // no value's mark: words
		{"read/write or admin?", "read/write or admin?", ""},
		{"Title it 'Login button broken' please", "Title it please", "'Login button broken'"},
		{`say "hello world" twice`, "say twice", `"hello world"`},
		{"say “hi” now", "say now", "“hi”"},
		{"don't drop Sam's comment", "don't drop Sam's comment", ""}, // apostrophes open nothing
		{"an 'unclosed quote", "an 'unclosed quote", ""},
		{"call +44 20 7946 0958 now", "call now", "+44 20 7946 0958"},
		{"fetch call CA5f1e2d3c4b and message MM800f44", "fetch call and message", "CA5f1e2d3c4b MM800f44"},
		{"message MM80", "message MM80", ""},                                   // short: a word
		{"convert the m4a and mp3 files", "convert the m4a and mp3 files", ""}, // short letter-digit words are words
		{"post to https://example.com/hook or ops@acme.com or @octocat", "post to or or", "https://example.com/hook ops@acme.com @octocat"},
		{"lock issue #482, it's heated", "lock issue it's heated", "#482,"},
		{"open notes.txt from release/3.0", "open from", "notes.txt release/3.0"},
		{"end of sentence.", "end of sentence.", ""},
		{"", "", ""},
	} {
		intent, args := splitArguments(c.query)
		if strings.Join(strings.Fields(intent), " ") != c.intent || strings.TrimSpace(args) != c.args {
			t.Errorf("splitArguments(%q) = %q, %q; want %q, %q", c.query, intent, args, c.intent, c.args)
		}
	}
}

// TestArgumentsWeighed: a repository's name in a request does not outrank
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
	if weights["renam"] != 1 || weights["branch"] != 1 || weights["bill"] != argumentWeight || weights["octo"] != argumentWeight {
		t.Errorf("weights %v: want the words 1 and the repository's %v", weights, argumentWeight)
	}
}

// FuzzSplitArguments: any text splits without panicking into an intent
// as long as the text (each value replaced by a space) and values that
// come from the text.
func FuzzSplitArguments(f *testing.F) {
	for _, s := range []string{"rename octo-org/x 'quoted text' now", "“a” ‘b’ «c» `d`", "'", "\"\"", "a'b'c", "\xff'\xfe'"} {
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
	q := strings.Repeat(`"a `, utcp.MaxQueryBytes/3)
	if _, args := splitArguments(q); args != "" {
		b.Fatalf("values %q in a query of unclosed quotes", args)
	}
	for b.Loop() {
		splitArguments(q)
	}
}
