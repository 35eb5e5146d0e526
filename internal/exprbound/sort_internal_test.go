package exprbound

import (
	"reflect"
	"testing"
)

// sortBy keeps the order of items with equal keys, ascending and
// descending, and sorts a copy of an array the program holds.
func TestSortByIsStable(t *testing.T) {
	t.Parallel()
	items := []any{"a1", "b1", "a2", "c1", "b2", "a3"}
	keysOf := func() []any { return []any{1.0, 2.0, 1.0, 3.0, 2.0, 1.0} }
	tests := []struct {
		order []any
		want  []any
	}{
		{nil, []any{"a1", "a2", "a3", "b1", "b2", "c1"}},
		{[]any{"asc"}, []any{"a1", "a2", "a3", "b1", "b2", "c1"}},
		{[]any{"desc"}, []any{"c1", "b1", "b2", "a1", "a2", "a3"}},
	}
	for _, tc := range tests {
		got, err := sortBy(append([]any{items, keysOf()}, tc.order...)...)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("order %v: got %v, want %v", tc.order, got, tc.want)
		}
	}
	if !reflect.DeepEqual(items, []any{"a1", "b1", "a2", "c1", "b2", "a3"}) {
		t.Errorf("the program's array was changed: %v", items)
	}
	if _, err := sortBy(items, keysOf(), "sideways"); err == nil {
		t.Error("an unknown order was taken")
	}
}
