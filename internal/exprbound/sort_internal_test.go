package exprbound

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
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

// sortByKeys orders as sort.Stable(byKeys) did, item for item, and fails
// as it did (the same panic, so the same error for the program), for
// every length from 0 to three times insertionMax: number keys with NaN
// among them, ints mixed with floats, strings, and numbers mixed with
// strings, ascending and descending.
func TestSortByKeysAsSortStable(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	kinds := map[string]func(n int) any{
		"numbers":             func(n int) any { return float64(rnd.IntN(n/3 + 1)) },
		"numbers with NaN":    func(n int) any { return []any{math.NaN(), float64(rnd.IntN(n/3 + 1))}[rnd.IntN(2)] },
		"ints and floats":     func(n int) any { return []any{rnd.IntN(n/3 + 1), float64(rnd.IntN(n/3 + 1))}[rnd.IntN(2)] },
		"strings":             func(n int) any { return fmt.Sprint(rnd.IntN(n/3 + 1)) },
		"numbers and strings": func(n int) any { return []any{float64(rnd.IntN(3)), fmt.Sprint(rnd.IntN(3))}[rnd.IntN(8)/7] },
	}
	sorted := func(sortFn func(items, keys []any), items, keys []any) (out []any, panicked string) {
		defer func() {
			if r := recover(); r != nil {
				panicked = fmt.Sprint(r)
			}
		}()
		sortFn(items, keys)
		return items, ""
	}
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		t.Run(name, func(t *testing.T) {
			for n := range 3*insertionMax + 1 {
				for _, desc := range []bool{false, true} {
					for range 10 {
						keys := make([]any, n)
						items := make([]any, n)
						for i := range n {
							keys[i], items[i] = kinds[name](n), i
						}
						k1, k2 := slices.Clone(keys), slices.Clone(keys)
						want, wantPanic := sorted(func(items, keys []any) { sort.Stable(byKeys{items, keys, desc}) }, slices.Clone(items), k1)
						got, gotPanic := sorted(func(items, keys []any) { sortByKeys(items, keys, desc) }, slices.Clone(items), k2)
						if gotPanic != wantPanic || wantPanic == "" && !slices.Equal(got, want) {
							t.Fatalf("n %d desc %v keys %v: got %v (panic %q), want %v (panic %q)", n, desc, keys, got, gotPanic, want, wantPanic)
						}
					}
				}
			}
		})
	}
}
