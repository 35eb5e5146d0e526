// The builtins whose cost grows faster than their input, rewritten or
// bounded before they run: a run's ticks stop it between iterations, so
// what one operation may cost is what the time budget can overrun by.

package exprbound

import (
	"fmt"
	"reflect"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"

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

// patternCost is what compiling a pattern allocates, per byte of it
// (measured here: about 400 bytes for `(.*a){300}b`), charged to the
// run's meter before it is compiled.
const patternCost = 512

// matchDynamic is `s matches p` for a pattern known at run time (p[0],
// p[1]), charging its compilation to the meter p[2].
func (b bounds) matchDynamic(p ...any) (any, error) {
	s, pattern := p[0], p[1]
	if runtime.IsNil(s) || runtime.IsNil(pattern) {
		return false, nil
	}
	pat, ok := pattern.(string)
	if !ok {
		return nil, fmt.Errorf("matches: the pattern is %s, not a string", Kind(pattern))
	}
	if len(pat) > MaxPatternLength {
		return nil, b.tooCostly(fmt.Sprintf("matches: a pattern built at run time is %d bytes, over the limit of %d", len(pat), MaxPatternLength))
	}
	chargeFrom(p[2], patternCost*int64(len(pat)))
	m, err := compileMatcher(pat)
	if err != nil {
		return nil, err
	}
	return b.match(s, m), nil
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
	ast.Patch(node, newNamedCall(matchesName, n.Type(), n.Location(), n.Left, n.Right, meterRef(n.Location())))
}

// matchesName is the bounded matches of a pattern known at run time,
// declared with expr.Function (Functions).
const matchesName = ReservedPrefix + "matches"

// uniqName is the linear uniq.
const uniqName = ReservedPrefix + "uniq"

// uniqSlot is what uniq holds an item in while it runs (its key and
// index in a map, its place in the answer and in the chains of equal
// keys, and the item as an interface when the array is of ints), charged
// before it runs.
const uniqSlot = 160

func (b bounds) tooCostly(msg string) error {
	if b.TooCostly != nil {
		return b.TooCostly(msg)
	}
	return fmt.Errorf("%s", msg)
}

// uniq is expr's uniq (the first of each run of equal items, in order,
// equal as == says) in time linear in the array: expr compares every item
// with every one kept, which took 9.9 s for 30,000 distinct numbers.
// Items are keyed so that equal items share a key (a number by its
// float64 value, a string by itself, an array or an object by shapeKey),
// and an item is compared with == only with the kept items of its key.
func (b bounds) uniq(p ...any) (any, error) {
	items := anySliceOf(p[0])
	chargeFrom(p[1], uniqSlot*int64(len(items)))
	// Made to hold every item at once: one allocation each, which the
	// charge above covers, rather than growing by doubling.
	out := make([]any, 0, len(items))
	next := make([]int32, 0, len(items)) // for each kept item, the next kept one of its key; -1: none
	heads := make(map[uniqKey]int32, len(items))
	for _, x := range items {
		k := b.uniqKey(x)
		head, ok := heads[k]
		last, seen := int32(-1), false
		for i := head; ok && i >= 0; i = next[i] {
			if runtime.Equal(x, out[i]) {
				seen = true
				break
			}
			last = i
		}
		if seen {
			continue
		}
		i := int32(len(out))
		out = append(out, x)
		next = append(next, -1)
		if !ok {
			heads[k] = i
		} else {
			next[last] = i
		}
	}
	return out, nil
}

// uniqKey is what uniq keys an item by: equal items (runtime.Equal) share
// one, and distinct items seldom do (numbers past 2^53 that round to the
// same float64, NaN, objects of numbers of different Go types).
type uniqKey struct {
	kind uint8
	num  float64
	str  string
}

// The kinds of uniqKey.
const (
	keyNil uint8 = iota
	keyFalse
	keyTrue
	keyNumber
	keyString
	keyShape // an array or an object, by shapeKey
	keyOther // a value shapeKey does not key
)

func (b bounds) uniqKey(x any) uniqKey {
	switch v := x.(type) {
	case nil:
		return uniqKey{kind: keyNil}
	case bool:
		if v {
			return uniqKey{kind: keyTrue}
		}
		return uniqKey{kind: keyFalse}
	case string:
		return uniqKey{kind: keyString, str: v}
	case int:
		return uniqKey{kind: keyNumber, num: float64(v)}
	case float64:
		return uniqKey{kind: keyNumber, num: v}
	}
	if runtime.IsNil(x) {
		// == finds null equal to a nil array or object (concat([], [])).
		return uniqKey{kind: keyNil}
	}
	r := reflect.ValueOf(x)
	switch {
	case r.CanInt():
		return uniqKey{kind: keyNumber, num: float64(r.Int())}
	case r.CanUint():
		return uniqKey{kind: keyNumber, num: float64(r.Uint())}
	case r.CanFloat():
		return uniqKey{kind: keyNumber, num: r.Float()}
	}
	// Arrays and objects, measured first (a value of shared parts may be
	// far larger to walk than it is in memory).
	if b.Normalize != nil {
		if _, err := b.Normalize(x); err != nil {
			return uniqKey{kind: keyOther}
		}
	}
	var sb strings.Builder
	if !shapeKey(&sb, r, 0) {
		return uniqKey{kind: keyOther}
	}
	return uniqKey{kind: keyShape, str: sb.String()}
}

// shapeKey writes v's key: values == finds equal write the same one. ==
// compares arrays item by item with == (1 and 1.0 are equal, an int past
// 2^53 and the float it rounds to too, -0 and 0), objects with
// reflect.DeepEqual (-0 and 0 equal again), and times by their instant:
// so numbers are written as the float64 they compare as, zero without its
// sign, and times in UTC. It reports false for a value it does not key (a
// struct, a pointer, a nesting deeper than MaxDepth).
func shapeKey(sb *strings.Builder, v reflect.Value, depth int) bool {
	if depth > MaxDepth {
		return false
	}
	if v.Kind() == reflect.Interface {
		if v.IsNil() {
			sb.WriteByte('n')
			return true
		}
		v = v.Elem()
	}
	if t, ok := v.Interface().(time.Time); ok {
		sb.WriteByte('T')
		sb.WriteString(t.UTC().Format(time.RFC3339Nano))
		return true
	}
	switch {
	case v.CanInt():
		return writeNumber(sb, float64(v.Int()))
	case v.CanUint():
		return writeNumber(sb, float64(v.Uint()))
	case v.CanFloat():
		return writeNumber(sb, v.Float())
	}
	switch v.Kind() {
	case reflect.Bool:
		sb.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.String:
		sb.WriteString(strconv.Itoa(v.Len()))
		sb.WriteByte('"')
		sb.WriteString(v.String())
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			sb.WriteByte('n')
			return true
		}
		sb.WriteByte('[')
		for i := range v.Len() {
			if !shapeKey(sb, v.Index(i), depth+1) {
				return false
			}
			sb.WriteByte(',')
		}
		sb.WriteByte(']')
	case reflect.Map:
		if v.IsNil() {
			sb.WriteByte('n')
			return true
		}
		entries := make([]string, 0, v.Len())
		it := v.MapRange()
		for it.Next() {
			var e strings.Builder
			if !shapeKey(&e, it.Key(), depth+1) {
				return false
			}
			e.WriteByte(':')
			if !shapeKey(&e, it.Value(), depth+1) {
				return false
			}
			entries = append(entries, e.String())
		}
		slices.Sort(entries)
		sb.WriteByte('{')
		for _, e := range entries {
			sb.WriteString(strconv.Itoa(len(e)))
			sb.WriteByte(':')
			sb.WriteString(e)
		}
		sb.WriteByte('}')
	default:
		return false
	}
	return true
}

// writeNumber writes a number's key: the float64 it compares as, 0 for -0.
func writeNumber(sb *strings.Builder, f float64) bool {
	if f == 0 {
		f = 0
	}
	sb.WriteByte('d')
	sb.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	sb.WriteByte(';')
	return true
}

// anySliceOf is xs's items, for uniq's argument of any array type.
func anySliceOf(xs any) []any {
	if k := reflect.ValueOf(xs).Kind(); k != reflect.Slice && k != reflect.Array {
		panic(fmt.Errorf("cannot uniq %s", k))
	}
	return anySlice(xs)
}
