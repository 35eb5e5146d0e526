package exprbound

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
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

// Each of sortByKeys's ways (by insertion up to insertionMax items, with
// number keys or others, then sort.Stable) orders as a stable sort of
// (key, item) pairs does, at the limit and one past it.
func TestSortByKeysBothWays(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, insertionMax - 1, insertionMax, insertionMax + 1, 3 * insertionMax} {
		for _, c := range []struct{ desc, strings bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			desc, strings := c.desc, c.strings
			for range 20 {
				items, keys := make([]any, n), make([]any, n)
				type pair struct{ key, item any }
				pairs := make([]pair, n)
				for i := range n {
					items[i], keys[i] = i, float64(rnd.IntN(n/3+1))
					if strings {
						keys[i] = fmt.Sprint(keys[i])
					}
					pairs[i] = pair{keys[i], items[i]}
				}
				slices.SortStableFunc(pairs, func(a, b pair) int {
					if desc {
						return compareKeys(b.key, a.key)
					}
					return compareKeys(a.key, b.key)
				})
				sortByKeys(items, keys, desc)
				for i, p := range pairs {
					if items[i] != p.item || keys[i] != p.key {
						t.Fatalf("n %d %+v: at %d got %v (key %v), want %v (key %v)", n, c, i, items[i], keys[i], p.item, p.key)
					}
				}
			}
		}
	}
}
