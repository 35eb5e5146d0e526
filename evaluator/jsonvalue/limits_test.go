package jsonvalue_test

import (
	"errors"
	"fmt"
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

// Limits.Yield is called once for each YieldEvery bytes decoded, at the
// end of an element or a member, in arrays and objects alike, and not at
// all for a document shorter than that; the error it returns stops
// decoding and is DecodeLimited's, whatever the rest of the document.
func TestDecodeLimitedYields(t *testing.T) {
	t.Parallel()
	elem := `"` + strings.Repeat("x", 1000) + `"`
	items := func(n int, obj bool) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = elem
			if obj {
				parts[i] = fmt.Sprintf(`"k%d":%s`, i, elem)
			}
		}
		if obj {
			return "{" + strings.Join(parts, ",") + "}"
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	stop := errors.New("stop")
	for _, tc := range []struct {
		name    string
		doc     string
		stopAt  int // the call that returns stop; 0: none
		calls   int
		wantErr error
	}{
		{"short", `[1,2,3]`, 0, 0, nil},
		{"array", items(300, false), 0, 300 * 1001 / jsonvalue.YieldEvery, nil},
		{"object", items(300, true), 0, 300 * 1010 / jsonvalue.YieldEvery, nil},
		{"stopped", items(300, false), 2, 2, stop},
		{"stopped before a syntax error", items(300, false) + "]", 1, 1, stop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			v, _, err := jsonvalue.DecodeLimited([]byte(tc.doc), jsonvalue.Limits{Yield: func() error {
				calls++
				if calls == tc.stopAt {
					return stop
				}
				return nil
			}})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil && v != nil {
				t.Fatalf("a value beside the error: %T", v)
			}
			if calls != tc.calls {
				t.Fatalf("Yield called %d times, want %d", calls, tc.calls)
			}
		})
	}
}
