package exprbound

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm/runtime"
)

// expr sorts with sort.Sort, which is not stable: items with equal keys
// come out in an order that depends on the input's, so the same selection
// written two ways (sort, then filter; or filter, then sort) can order ties
// differently. sortBy and sort are rewritten into a stable sort:
//
//	sortBy(a, p, o)  →  let __sorting = a; __sortBy(__sorting, map(__sorting, p), o)
//	sort(a, o)       →  let __sorting = a; __sortBy(__sorting, map(__sorting, #), o)
//
// map computes the keys as sortBy did (the iterations of p counted, the
// keys' array charged to the memory budget as sortBy's and sort's arrays
// were), and __sortBy orders the items by them, stably.

const (
	sortByName = "__sortBy"
	sortingVar = "__sorting"
)

var anysType = reflect.TypeOf([]any(nil))

// stableSort rewrites a sortBy or sort node.
func stableSort(node *ast.Node, n *ast.BuiltinNode) {
	loc := n.Location()
	arr := n.Arguments[0]
	rest := n.Arguments[1:]
	var key ast.Node
	if n.Name == "sortBy" {
		key, rest = rest[0], rest[1:]
	} else {
		key = typed(&ast.PredicateNode{Node: typed(&ast.PointerNode{}, anyType, loc)}, anyType, loc)
	}
	ref := func() ast.Node { return typed(&ast.IdentifierNode{Value: sortingVar}, arr.Type(), arr.Location()) }
	keys := typed(&ast.BuiltinNode{Name: "map", Arguments: []ast.Node{ref(), key}}, anysType, loc)
	sorted := newNamedCall(sortByName, n.Type(), loc, append([]ast.Node{ref(), keys}, rest...)...)
	ast.Patch(node, typed(&ast.VariableDeclaratorNode{Name: sortingVar, Value: arr, Expr: sorted}, n.Type(), loc))
}

// sortBy orders p[0]'s items by the keys p[1] (one per item), ascending
// or, when p[2] is "desc", descending; items of equal keys keep their order.
func sortBy(p ...any) (any, error) {
	items, keys := anySlice(p[0]), p[1].([]any)
	desc := false
	if len(p) == 3 {
		switch p[2] {
		case "asc":
		case "desc":
			desc = true
		default:
			return nil, fmt.Errorf("unknown order %v: want \"asc\" or \"desc\"", p[2])
		}
	}
	// The items are sorted in a copy, and the keys (map's fresh array,
	// nobody else's) beside them: no array of pairs.
	out := items
	if _, shared := p[0].([]any); shared {
		out = slices.Clone(items)
	}
	sortByKeys(out, keys, desc)
	return out, nil
}

// insertionMax is the longest array sortByKeys sorts by insertion:
// sort.Stable's own block, which it sorts by insertion too, so that
// sortByKeys makes the same comparisons in the same order as
// sort.Stable(byKeys) and gives the same order (NaN keys included) and
// the same failure.
const insertionMax = 20

// sortByKeys sorts items by keys, stably, swapping both: short arrays (the
// usual "the 5 cheapest of 20") by insertion, with no call through an
// interface a comparison; longer ones with sort.Stable.
func sortByKeys(items, keys []any, desc bool) {
	if len(items) > insertionMax {
		sort.Stable(byKeys{items, keys, desc})
		return
	}
	if allNumbers(keys) {
		// Prices, dates as numbers, counts: compared as floats, with no
		// call a comparison (NaN is before nothing, as in compareKeys).
		for i := 1; i < len(keys); i++ {
			k, item := keys[i], items[i]
			x := k.(float64)
			j := i
			for ; j > 0; j-- {
				y := keys[j-1].(float64)
				if desc && !(y < x) || !desc && !(x < y) {
					break
				}
				keys[j], items[j] = keys[j-1], items[j-1]
			}
			keys[j], items[j] = k, item
		}
		return
	}
	for i := 1; i < len(keys); i++ {
		k, item := keys[i], items[i]
		j := i
		for ; j > 0 && keyBefore(k, keys[j-1], desc); j-- {
			keys[j], items[j] = keys[j-1], items[j-1]
		}
		keys[j], items[j] = k, item
	}
}

// allNumbers reports whether every key is a float64.
func allNumbers(keys []any) bool {
	for _, k := range keys {
		if _, ok := k.(float64); !ok {
			return false
		}
	}
	return true
}

// keyBefore reports whether an item of key a goes before an item of key b
// (strictly: equal keys keep their order), comparing in the order
// byKeys.Less does, so that keys that cannot be compared fail alike.
func keyBefore(a, b any, desc bool) bool {
	if desc {
		return compareKeys(b, a) < 0
	}
	return compareKeys(a, b) < 0
}

// byKeys sorts items by keys, swapping both.
type byKeys struct {
	items, keys []any
	desc        bool
}

func (s byKeys) Len() int { return len(s.items) }

func (s byKeys) Less(i, j int) bool { return keyBefore(s.keys[i], s.keys[j], s.desc) }

func (s byKeys) Swap(i, j int) {
	s.items[i], s.items[j] = s.items[j], s.items[i]
	s.keys[i], s.keys[j] = s.keys[j], s.keys[i]
}

// compareKeys orders a and b as expr's < does (and panics as it does on
// keys it cannot compare), numbers first-class.
func compareKeys(a, b any) int {
	if x, ok := a.(float64); ok {
		if y, ok := b.(float64); ok {
			switch {
			case x < y:
				return -1
			case y < x:
				return 1
			}
			return 0
		}
	}
	switch {
	case runtime.Less(a, b):
		return -1
	case runtime.Less(b, a):
		return 1
	}
	return 0
}

// anySlice returns the items of an array as []any.
func anySlice(v any) []any {
	switch a := v.(type) {
	case []any:
		return a
	case []int:
		return toAnys(a)
	case []float64:
		return toAnys(a)
	case []string:
		return toAnys(a)
	}
	rv := reflect.ValueOf(v)
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out
}

func toAnys[T any](a []T) []any {
	out := make([]any, len(a))
	for i, x := range a {
		out[i] = x
	}
	return out
}
