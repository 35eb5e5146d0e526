package openapi

import (
	"strings"
	"testing"
)

// TestNesting: each byte counts how many objects and arrays it is inside
// of; brackets in strings are text.
func TestNesting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want int
	}{
		{`1`, 0},
		{`[]`, 1},                       // [ at 1, ] at 0
		{`[[]]`, 4},                     // 1 2 1 0
		{`{"a":[1]}`, 1*5 + 2 + 2 + 1},  // { " a " : at 1, [ 1 at 2, ] at 1, } at 0
		{`["[{"]`, 1 * 5},               // the string's brackets are text
		{`["\"[",[]]`, 1*6 + 2 + 1 + 1}, // an escaped quote does not end the string
		{`["\\",[]]`, 1*5 + 2 + 1 + 1},  // an escaped backslash does not escape the quote after it
	} {
		if got := nesting([]byte(tc.raw)); got != tc.want {
			t.Errorf("nesting(%s): got %d, want %d", tc.raw, got, tc.want)
		}
	}
}

// TestMeanDepthBound: a document nested MaxMeanDepth deep on average is
// read; one nested deeper is refused.
func TestMeanDepthBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		k       int // arrays inside one another: k/2 deep on average
		refused bool
	}{
		{"at the bound", 2 * MaxMeanDepth, false},
		{"past it", 2*MaxMeanDepth + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkNesting([]byte(strings.Repeat("[", tc.k) + strings.Repeat("]", tc.k)))
			if refused := err != nil && strings.Contains(err.Error(), "openapi.MaxMeanDepth"); refused != tc.refused {
				t.Errorf("got %v, want refused: %v", err, tc.refused)
			}
		})
	}
}
