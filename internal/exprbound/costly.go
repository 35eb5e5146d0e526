// The builtins whose cost grows faster than their input, rewritten or
// bounded before they run: a run's ticks stop it between iterations, so
// what one operation may cost is what the time budget can overrun by.

package exprbound

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"regexp/syntax"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm/runtime"
)

// MaxMatchCost bounds one `matches`: the string's bytes times the
// compiled pattern's instructions. Go's regexp runs in time linear in
// both (measured here: up to about 11 ns per unit, for `(.*a){300}b`
// over 100,000 characters), so one match costs at most about 90 ms;
// `s matches "^[a-z]+$"` (6 instructions) is allowed over 1.4 MB.
const MaxMatchCost = 1 << 23

// MaxPatternLength bounds a pattern built at run time, in bytes: one
// compiled per evaluation costs about a millisecond per 2,000 bytes.
const MaxPatternLength = 2_000

// matcher is a compiled pattern and its size in instructions.
type matcher struct {
	re    *regexp.Regexp
	insts int
}

// compileMatcher compiles p as regexp.Compile does, and counts its
// program's instructions.
func compileMatcher(p string) (matcher, error) {
	re, err := regexp.Compile(p)
	if err != nil {
		return matcher{}, err
	}
	parsed, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return matcher{}, err
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return matcher{}, err
	}
	return matcher{re: re, insts: len(prog.Inst)}, nil
}

// match is `s matches m`, refused past MaxMatchCost.
func (b bounds) match(s any, m matcher) bool {
	str, ok := s.(string)
	if !ok {
		panic(fmt.Errorf("matches: the left side is %s, not a string", Kind(s)))
	}
	if cost := int64(len(str)) * int64(m.insts); cost > MaxMatchCost {
		panic(b.tooCostly(fmt.Sprintf("matches of a pattern of %d instructions over a string of %d bytes would cost %d, over the limit of %d (bytes × instructions): match a shorter string or a simpler pattern", m.insts, len(str), cost, MaxMatchCost)))
	}
	return m.re.MatchString(str)
}

// matchConst is `s matches "constant"`, compiled once with the program.
func (b bounds) matchConst(m matcher) func(any) any {
	return func(s any) any {
		if runtime.IsNil(s) {
			return false
		}
		return b.match(s, m)
	}
}

// matchDynamic is `s matches p` for a pattern known at run time.
func (b bounds) matchDynamic(s, p any) any {
	if runtime.IsNil(s) || runtime.IsNil(p) {
		return false
	}
	pat, ok := p.(string)
	if !ok {
		panic(fmt.Errorf("matches: the pattern is %s, not a string", Kind(p)))
	}
	if len(pat) > MaxPatternLength {
		panic(b.tooCostly(fmt.Sprintf("matches: a pattern built at run time is %d bytes, over the limit of %d", len(pat), MaxPatternLength)))
	}
	m, err := compileMatcher(pat)
	if err != nil {
		panic(err)
	}
	return b.match(s, m)
}

// swapMatches replaces n, a matches, with the bounded one.
func (b bounds) swapMatches(node *ast.Node, n *ast.BinaryNode) {
	if str, ok := n.Right.(*ast.StringNode); ok {
		m, err := compileMatcher(str.Value)
		if err != nil {
			return // expr's compiler reports it as it does today
		}
		replaceWithCall(node, b.matchConst(m), n.Left)
		return
	}
	replaceWithCall(node, b.matchDynamic, n.Left, n.Right)
}

func (b bounds) tooCostly(msg string) error {
	if b.TooCostly != nil {
		return b.TooCostly(msg)
	}
	return fmt.Errorf("%s", msg)
}

// uniq is expr's uniq (the first of each run of equal items, in order,
// equal as == says) in time linear in the array: expr compares every item
// with every one kept, which took 9.9 s for 30,000 distinct numbers.
// Items are put in buckets by a key that equal items share (a number's
// float64 value, a string, a bool, nil; an array's or an object's JSON), and
// compared with == only within their bucket.
func (b bounds) uniq(xs any) any {
	items := anySliceOf(xs)
	out := make([]any, 0, min(len(items), 64))
	buckets := make(map[any][]any, min(len(items), 1024))
	for _, x := range items {
		k := b.uniqKey(x)
		seen := false
		for _, y := range buckets[k] {
			if runtime.Equal(x, y) {
				seen = true
				break
			}
		}
		if !seen {
			buckets[k] = append(buckets[k], x)
			out = append(out, x)
		}
	}
	return out
}

// uniqKeyOther is the bucket of items uniqKey cannot key.
type uniqKeyOther struct{}

// uniqKey is an item's bucket: equal items (runtime.Equal) share one.
func (b bounds) uniqKey(x any) any {
	switch v := x.(type) {
	case nil:
		return nil
	case string, bool:
		return v
	case int:
		return float64(v)
	case float64:
		return v
	}
	r := reflect.ValueOf(x)
	switch {
	case r.CanInt():
		return float64(r.Int())
	case r.CanUint():
		return float64(r.Uint())
	case r.CanFloat():
		return r.Float()
	}
	// Arrays and objects: equal ones (reflect.DeepEqual, as == compares
	// them) render the same JSON, measured first (a value of shared parts
	// may render far larger than it is); a value that does not render
	// shares one bucket.
	if b.Normalize != nil {
		v, err := b.Normalize(x)
		if err != nil {
			return uniqKeyOther{}
		}
		x = v
	}
	if js, err := json.Marshal(x); err == nil {
		return string(js)
	}
	return uniqKeyOther{}
}

// anySliceOf is xs's items, for uniq's argument of any array type.
func anySliceOf(xs any) []any {
	if k := reflect.ValueOf(xs).Kind(); k != reflect.Slice && k != reflect.Array {
		panic(fmt.Errorf("cannot uniq %s", k))
	}
	return anySlice(xs)
}
