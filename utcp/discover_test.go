package utcp_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/exprd/exprd/utcp"
)

// TestYAMLKeysAreNotComparedPairwise: a YAML document is read without
// looking for duplicate keys (the YAML reader compares every key of a
// mapping with every other: 40,000 keys took 16 s); a key given twice
// keeps its last value, as in JSON, and only the first document is read.
func TestYAMLKeysAreNotComparedPairwise(t *testing.T) {
	t.Parallel()
	var wideYAML strings.Builder
	wideYAML.WriteString("k:\n")
	for i := range 20_000 {
		fmt.Fprintf(&wideYAML, "  p%d: %d\n", i, i)
	}
	for _, tc := range []struct {
		name, doc string
		want      string // the document as JSON
	}{
		{"a key twice", "a: 1\na: 2\n", `{"a":2}`},
		{"two documents", "a: 1\n---\nb: 2\n", `{"a":1}`},
		{"20,000 keys", wideYAML.String(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := utcp.DecodeDocument([]byte(tc.doc), "application/yaml", "")
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if n := len(v.(map[string]any)["k"].(map[string]any)); n != 20_000 {
					t.Errorf("got %d keys", n)
				}
				return
			}
			if raw, _ := json.Marshal(v); string(raw) != tc.want {
				t.Errorf("got %s, want %s", raw, tc.want)
			}
		})
	}
}
