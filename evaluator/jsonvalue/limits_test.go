package jsonvalue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/exprd/exprd/evaluator/jsonvalue"
)

// DecodeLimited holds each bound at the limit and stops one past it, with
// the bound named; Decode's own depth stays encoding/json's.
func TestDecodeLimited(t *testing.T) {
	t.Parallel()
	lim := jsonvalue.Limits{MaxDepth: 3, MaxContainers: 4}
	for _, tc := range []struct {
		doc, want string // want: the LimitError's What, "" for none
	}{
		{`[[[]]]`, ""},
		{`[[[[]]]]`, "depth"},
		{`[{},{},{}]`, ""},
		{`[{},{},{},{}]`, "containers"},
		{`[1, "x", true, null]`, ""},
		{`{"a":[{},[]]}`, ""},
		{`{"a":{"b":{}}}`, ""},
		{`{"a":{"b":{"c":{}}}}`, "depth"},
	} {
		_, _, err := jsonvalue.DecodeLimited([]byte(tc.doc), lim)
		var le *jsonvalue.LimitError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: got %v, want no error", tc.doc, err)
		case tc.want != "" && (!errors.As(err, &le) || le.What != tc.want):
			t.Errorf("%s: got %v, want a LimitError on %s", tc.doc, err, tc.want)
		}
	}
	deep := strings.Repeat("[", jsonvalue.MaxDepth+1) + strings.Repeat("]", jsonvalue.MaxDepth+1)
	var se *jsonvalue.SyntaxError
	if _, _, err := jsonvalue.DecodeLimited([]byte(deep), jsonvalue.Limits{}); !errors.As(err, &se) {
		t.Errorf("past MaxDepth without a bound of its own: got %v, want encoding/json's SyntaxError", err)
	}
}

func TestDecodeLimitedCounts(t *testing.T) {
	t.Parallel()
	_, n, err := jsonvalue.DecodeLimited([]byte(`{"a":[{},[1,{"b":2}]],"c":"x"}`), jsonvalue.Limits{})
	if err != nil || n != 5 {
		t.Errorf("got %d, %v; want 5 objects and arrays", n, err)
	}
}
