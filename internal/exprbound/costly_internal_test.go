package exprbound

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/expr-lang/expr/builtin"
)

// exprUniq is expr's own uniq, the quadratic one the sandbox swaps out.
func exprUniq(t testing.TB) func(...any) (any, error) {
	for _, f := range builtin.Builtins {
		if f.Name == "uniq" {
			return f.Func
		}
	}
	t.Fatal("expr has no uniq")
	return nil
}

// FuzzUniqIsExprs holds the linear uniq to expr's on arrays decoded from
// JSON (numbers as float64 and, for whole numbers, as int too, so that ints
// and floats that are == meet), nested arrays and objects among them: the
// same items, in the same order.
func FuzzUniqIsExprs(f *testing.F) {
	for _, seed := range []string{
		`[1, 2, 2, 1, 3]`, `[1, 1.0, "1", true, null, null, false, true]`,
		`[[1], [1], {"a": 1}, {"a": 1}, {"a": [1, 2]}, {"a": [1, 2]}, []]`,
		`[9007199254740993, 9007199254740992, 9007199254740993]`, `[]`, `["", "", " "]`,
	} {
		f.Add(seed, true)
	}
	want := exprUniq(f)
	b := bounds{Limits{Normalize: func(v any) (any, error) { return Normalize(v, ValueLimits{MaxBytes: 1 << 20}) }}}
	f.Fuzz(func(t *testing.T, js string, ints bool) {
		var items []any
		if err := json.Unmarshal([]byte(js), &items); err != nil || len(items) > 200 {
			return
		}
		if ints {
			for i, x := range items {
				if f, ok := x.(float64); ok && f == float64(int(f)) {
					items[i] = int(f)
				}
			}
		}
		exp, err := want(items)
		if err != nil {
			t.Fatalf("expr's uniq: %v", err)
		}
		got, err := b.uniq(items, (*Meter)(nil))
		if err != nil {
			t.Fatalf("uniq: %v", err)
		}
		if !reflect.DeepEqual(got, exp) {
			t.Fatalf("uniq(%s): got %v, want expr's %v", js, got, exp)
		}
	})
}
