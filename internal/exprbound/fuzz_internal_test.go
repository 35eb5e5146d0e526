package exprbound

// Fuzz targets with an oracle for the fast paths of the checked
// arithmetic, the stable sort and the linear uniq: each input goes
// through the fast path and through a plain reference written here (or
// the slow path the fast one stands for), and the two must agree.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm/runtime"
)

// outcome is what an operation gave: its value, or the message of the
// panic or error it failed with.
type outcome struct {
	val any
	err string
}

// catch runs f, turning its panic into the outcome's error.
func catch(f func() any) (o outcome) {
	defer func() {
		if r := recover(); r != nil {
			o = outcome{err: fmt.Sprint(r)}
		}
	}()
	return outcome{val: f()}
}

// arithClass is the wording class of an arithmetic refusal: what a
// caller tells apart, the rest of the message being its operands.
func arithClass(msg string) string {
	for _, c := range []string{"integer overflow", "modulo by zero", "division by zero", "no finite result", "takes whole numbers", "does not fit in a 64-bit integer"} {
		if strings.Contains(msg, c) {
			return c
		}
	}
	return msg
}

// bigOutcome is the reference's answer for an integer result r: r as an
// int when it fits, an overflow otherwise.
func bigOutcome(r *big.Int) outcome {
	if !r.IsInt64() {
		return outcome{err: "integer overflow"}
	}
	return outcome{val: int(r.Int64())}
}

// wholeRef is the reference of whole: a float that is an integer an int64
// holds, decided with big.Float, not with the float's own arithmetic.
func wholeRef(f float64) (int64, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	b := big.NewFloat(f)
	if !b.IsInt() {
		return 0, false
	}
	i, acc := b.Int64()
	return i, acc == big.Exact
}

// arithCase is one operation of FuzzArith: the checked one, and the
// reference's answer.
type arithCase struct {
	name string
	got  func() any
	want outcome
}

func arithCases(x, y int, a, b float64) []arithCase {
	bx, by := big.NewInt(int64(x)), big.NewInt(int64(y))
	cases := []arithCase{
		{"int +", func() any { return add(x, y) }, bigOutcome(new(big.Int).Add(bx, by))},
		{"int -", func() any { return sub(x, y) }, bigOutcome(new(big.Int).Sub(bx, by))},
		{"int *", func() any { return mul(x, y) }, bigOutcome(new(big.Int).Mul(bx, by))},
		{"int unary -", func() any { return neg(x) }, bigOutcome(new(big.Int).Neg(bx))},
		{"abs", func() any { return abs(x) }, bigOutcome(new(big.Int).Abs(bx))},
		// Float + - * keep expr's result: runtime's is the slow path.
		{"float +", func() any { return add(a, b) }, catch(func() any { return runtime.Add(a, b) })},
		{"float -", func() any { return sub(a, b) }, catch(func() any { return runtime.Subtract(a, b) })},
		{"float *", func() any { return mul(a, b) }, catch(func() any { return runtime.Multiply(a, b) })},
		{"float unary -", func() any { return neg(a) }, catch(func() any { return runtime.Negate(a) })},
	}
	// % of integers: Go's truncated remainder, which big.Int's Rem is.
	modRef := outcome{err: "modulo by zero"}
	if y != 0 {
		modRef = bigOutcome(new(big.Int).Rem(bx, by))
	}
	cases = append(cases, arithCase{"int %", func() any { return mod(x, y) }, modRef})
	// % of floats: whole ones are the integers they hold.
	fmodRef := outcome{err: "modulo by zero"}
	if b != 0 {
		wa, aok := wholeRef(a)
		wb, bok := wholeRef(b)
		if aok && bok {
			fmodRef = bigOutcome(new(big.Int).Rem(big.NewInt(wa), big.NewInt(wb)))
		} else {
			fmodRef = outcome{err: "takes whole numbers"}
		}
	}
	cases = append(cases, arithCase{"float %", func() any { return mod(a, b) }, fmodRef})
	// / is always a float; one with no finite result is refused.
	divRef := outcome{val: float64(x) / float64(y)}
	if y == 0 {
		divRef = outcome{err: "division by zero"}
	}
	cases = append(cases, arithCase{"int /", func() any { return div(x, y) }, divRef})
	fdivRef := outcome{val: a / b}
	switch {
	case b == 0:
		fdivRef = outcome{err: "division by zero"}
	case math.IsNaN(a/b) || math.IsInf(a/b, 0):
		fdivRef = outcome{err: "no finite result"}
	}
	cases = append(cases, arithCase{"float /", func() any { return div(a, b) }, fdivRef})
	// int(): a float out of the int range is refused, not converted.
	toIntRef := outcome{err: "does not fit in a 64-bit integer"}
	if !math.IsNaN(a) && !math.IsInf(a, 0) {
		if _, acc := big.NewFloat(math.Trunc(a)).Int64(); acc == big.Exact {
			toIntRef = outcome{val: builtin.Int(a)}
		}
	}
	cases = append(cases, arithCase{"int()", func() any { return toInt(a) }, toIntRef})
	return cases
}

// sameValue is equality of results where NaN equals NaN and 0 is not -0.
func sameValue(a, b any) bool {
	x, xok := a.(float64)
	y, yok := b.(float64)
	if xok && yok {
		return math.Float64bits(x) == math.Float64bits(y) || (math.IsNaN(x) && math.IsNaN(y))
	}
	return a == b
}

// FuzzArith holds the checked arithmetic, whose fast paths check an
// overflow with the operation's own machine arithmetic (the signs of a
// sum, a product divided back) and take a whole float as an integer, to a
// reference in math/big: the same value, or a refusal of the same class.
func FuzzArith(f *testing.F) {
	ints := []int64{0, 1, -1, 2, -2, 3, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 1 << 32, -(1 << 32), 3037000499, 3037000500, -3037000500, 1 << 53, (1 << 53) + 1}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -2.5, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1 << 63, -(1 << 63), math.Nextafter(1<<63, 0), math.Nextafter(-(1 << 63), 0), 1 << 53, 1e300}
	for i, x := range ints {
		f.Add(x, ints[(i*7+3)%len(ints)], floats[i%len(floats)], floats[(i*5+1)%len(floats)])
	}
	for i, a := range floats {
		f.Add(ints[i%len(ints)], int64(-1), a, floats[(i+1)%len(floats)])
	}
	f.Fuzz(func(t *testing.T, x64, y64 int64, a, b float64) {
		for _, c := range arithCases(int(x64), int(y64), a, b) {
			got := catch(c.got)
			if (got.err == "") != (c.want.err == "") || arithClass(got.err) != arithClass(c.want.err) || !sameValue(got.val, c.want.val) {
				t.Errorf("%s of %d, %d, %v, %v: got %v %q, want %v %q", c.name, x64, y64, a, b, got.val, got.err, c.want.val, c.want.err)
			}
			var ae *ArithmeticError
			if got.err != "" && !errors.As(recovered(c.got), &ae) {
				t.Errorf("%s of %d, %d, %v, %v: the refusal is not an *ArithmeticError", c.name, x64, y64, a, b)
			}
		}
	})
}

// recovered is the value f panics with, as an error.
func recovered(f func() any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err, _ = r.(error)
		}
	}()
	f()
	return nil
}

// fuzzKeys turns the fuzzer's bytes into sort keys: numbers (NaN, ±0,
// ±Inf among them), strings, and now and then an int or a null, which
// cannot be compared with a float or a string and make the sort fail.
func fuzzKeys(data []byte) []any {
	numbers := []float64{math.NaN(), 0, math.Copysign(0, -1), 1, -1, 2, 2.5, math.Inf(1), math.Inf(-1), math.MaxFloat64}
	var keys []any
	for i := 0; i+1 < len(data) && len(keys) < 2*insertionMax; i += 2 {
		v := int(data[i+1])
		switch data[i] % 8 {
		case 0, 1, 2, 3:
			keys = append(keys, numbers[v%len(numbers)])
		case 4, 5:
			keys = append(keys, string(rune('a'+v%4)))
		case 6:
			keys = append(keys, v%3)
		default:
			keys = append(keys, nil)
		}
	}
	return keys
}

// FuzzSortByKeys holds sortByKeys, which sorts an array of up to
// insertionMax items by insertion (its keys all numbers: compared as
// floats, with no call), to sort.Stable over the same keys: the same
// order, NaN keys included, or the same failure.
func FuzzSortByKeys(f *testing.F) {
	for _, seed := range [][]byte{
		{}, {0, 1}, {0, 0, 0, 1, 0, 0}, {0, 3, 0, 1, 0, 0, 0, 4}, {0, 7, 0, 8, 0, 1, 0, 2},
		{4, 0, 4, 1, 4, 0}, {0, 1, 4, 0}, {0, 1, 6, 1}, {7, 0, 7, 0}, {7, 0, 0, 1},
		{0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 9, 0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0, 9, 0, 0},
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, desc bool) {
		keys := fuzzKeys(data)
		items := make([]any, len(keys))
		for i := range items {
			items[i] = i
		}
		fastItems, fastKeys := slices.Clone(items), slices.Clone(keys)
		fast := catch(func() any { sortByKeys(fastItems, fastKeys, desc); return fastItems })
		slowItems, slowKeys := slices.Clone(items), slices.Clone(keys)
		slow := catch(func() any { sort.Stable(byKeys{slowItems, slowKeys, desc}); return slowItems })
		if fast.err != slow.err || fmt.Sprint(fast.val) != fmt.Sprint(slow.val) {
			t.Fatalf("keys %v desc %v: sortByKeys %v %q, sort.Stable %v %q", keys, desc, fast.val, fast.err, slow.val, slow.err)
		}
	})
}

// fuzzItems turns the fuzzer's bytes into the items of an array to uniq:
// numbers of both kinds (2^53 and 2^53+1, which one float holds), NaN,
// ±0, strings (invalid UTF-8 too), booleans, null and nil arrays and
// objects (== finds them equal), one instant in two zones, and arrays and
// objects of them.
func fuzzItems(data []byte) []any {
	instant := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	scalars := []any{
		0, 1, 1.0, math.Copysign(0, -1), 0.0, math.NaN(), 1 << 53, (1 << 53) + 1, float64(1 << 53), "a", "", "\xff", true, false, nil, -1,
		[]any(nil), map[string]any(nil), instant, instant.In(time.FixedZone("x", 3600)), "\xfe", []string{"a"}, []any{"a"},
	}
	var items []any
	for i := 0; i+1 < len(data) && len(items) < 32; i += 2 {
		s := scalars[int(data[i+1])%len(scalars)]
		switch data[i] % 4 {
		case 0, 1:
			items = append(items, s)
		case 2:
			items = append(items, []any{s})
		default:
			items = append(items, map[string]any{"k": s})
		}
	}
	return items
}

// FuzzUniq holds the linear uniq, which compares an item only with the
// kept items of its key, to expr's own, which compares it with every kept
// item, on the Go values a program holds that JSON cannot write
// (FuzzUniqIsExprs has those it can): the same items kept, in the same
// order, with and without a normaliser to measure arrays and objects by.
func FuzzUniq(f *testing.F) {
	for _, seed := range [][]byte{
		{}, {0, 0, 0, 1, 0, 2}, {0, 5, 0, 5}, {0, 3, 0, 4}, {0, 6, 0, 7, 0, 8},
		{2, 6, 2, 7}, {2, 1, 2, 2}, {3, 1, 3, 2}, {3, 5, 3, 5}, {0, 14, 2, 14, 3, 14},
		{0, 9, 0, 10, 0, 11, 0, 9}, {2, 3, 2, 4}, {0, 12, 0, 13, 0, 12},
		{0, 14, 0, 16}, {0, 17, 0, 14}, {2, 14, 2, 16}, {0, 18, 0, 19}, {2, 18, 2, 19}, {3, 18, 3, 19},
		{0, 11, 0, 20}, {0, 21, 0, 22}, {2, 21, 2, 22}, {2, 7, 2, 8}, {3, 7, 3, 8}, {3, 3, 3, 4},
	} {
		f.Add(seed)
	}
	expr := exprUniq(f)
	withNormalize := bounds{Limits{Normalize: func(v any) (any, error) { return Normalize(v, ValueLimits{}) }}}
	f.Fuzz(func(t *testing.T, data []byte) {
		items := fuzzItems(data)
		exp, err := expr(slices.Clone(items))
		if err != nil {
			t.Fatalf("expr's uniq: %v", err)
		}
		want := fmt.Sprintf("%#v", exp)
		for _, b := range []bounds{{}, withNormalize} {
			got, err := b.uniq(slices.Clone(items), (*Meter)(nil))
			if err != nil {
				t.Fatal(err)
			}
			if g := fmt.Sprintf("%#v", got); g != want {
				t.Fatalf("uniq of %#v (normaliser %v):\n got  %s\n want %s", items, b.Normalize != nil, g, want)
			}
		}
	})
}

// valueReader builds a value from the fuzzer's bytes: each byte picks a
// kind, and the bytes after it its content.
type valueReader struct{ data []byte }

func (r *valueReader) byte() int {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return int(b)
}

// fuzzFloats are the floats a value holds: NaN and ±Inf, which are not
// JSON, and the numbers at float64's edges.
var fuzzFloats = []float64{0, math.Copysign(0, -1), 1.5, -1, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, math.SmallestNonzeroFloat64, 1 << 63}

// fuzzStrings are the strings a value holds: empty, multibyte, invalid
// UTF-8.
var fuzzStrings = []string{"", "a", "ab", "éé", "\xff\xfe", "日本語", "a\x00b"}

type opaque struct{ X int }

func (r *valueReader) value(depth int) any {
	if depth > 6 {
		return nil
	}
	n := r.byte()
	switch n % 24 {
	case 0:
		return nil
	case 1:
		return n%2 == 0
	case 2:
		return []int{0, 1, -1, math.MaxInt64, math.MinInt64}[r.byte()%5]
	case 3:
		return fuzzFloats[r.byte()%len(fuzzFloats)]
	case 4:
		return fuzzStrings[r.byte()%len(fuzzStrings)]
	case 5:
		items := make([]any, r.byte()%4)
		for i := range items {
			items[i] = r.value(depth + 1)
		}
		return items
	case 6:
		m := map[string]any{}
		for i := range r.byte() % 3 {
			m[fuzzStrings[i+r.byte()%2]] = r.value(depth + 1)
		}
		return m
	case 7:
		m := map[any]any{}
		for i := range r.byte() % 3 {
			var k any = fuzzStrings[i]
			if r.byte()%4 == 0 {
				k = i
			}
			m[k] = r.value(depth + 1)
		}
		return m
	case 8:
		return fuzzStrings[:r.byte()%len(fuzzStrings)]
	case 9:
		return []int{1, 2, 3}[:r.byte()%4]
	case 10:
		return []byte(fuzzStrings[r.byte()%len(fuzzStrings)])
	case 11:
		v := r.value(depth + 1)
		return &v
	case 12:
		return map[string]int{"a": 1, "b": r.byte()}
	case 13:
		return time.Duration(r.byte()) * time.Millisecond
	case 14:
		return int8(-r.byte() / 2)
	case 15:
		return float32(fuzzFloats[r.byte()%len(fuzzFloats)])
	case 16:
		return uint64(math.MaxUint64)
	case 17:
		return opaque{1}
	case 18:
		return []any(nil)
	case 19:
		return map[string]any(nil)
	case 20:
		// Nesting to MaxDepth and past it, counted from this value's
		// depth: levels of arrays around a leaf.
		levels := MaxDepth - 2 + r.byte()%4
		var v any = r.value(depth + 1)
		for range levels {
			v = []any{v}
		}
		return v
	case 21:
		return time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	case 22:
		return (*int)(nil)
	default:
		return json.Number("12")
	}
}

// refNormalizer is the reference of Normalize: it builds a new value
// every time, and records every refusal the value deserves rather than
// stopping at the first (the order of a map's keys decides which one
// Normalize meets first).
type refNormalizer struct {
	l       ValueLimits
	size    int
	refused map[ValueLimit]bool
}

func (n *refNormalizer) refuse(over ValueLimit) any {
	n.refused[over] = true
	return nil
}

func (n *refNormalizer) value(v any, depth int) any {
	n.size += valueBytes
	if depth > MaxDepth {
		return n.refuse(NotJSON)
	}
	return n.convert(v, depth)
}

func (n *refNormalizer) str(s string) any {
	n.size += len(s)
	if n.l.MaxString > 0 && utf8.RuneCountInString(s) > n.l.MaxString {
		return n.refuse(OverString)
	}
	return s
}

func (n *refNormalizer) number(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return n.refuse(NotJSON)
	}
	return f
}

func (n *refNormalizer) array(items []any, depth int) any {
	if n.l.MaxArray > 0 && len(items) > n.l.MaxArray {
		return n.refuse(OverArray)
	}
	out := make([]any, len(items))
	for i, x := range items {
		out[i] = n.value(x, depth+1)
	}
	return out
}

func (n *refNormalizer) object(keys []any, values []any, depth int) any {
	out := map[string]any{}
	refused := false
	for i, k := range keys {
		// A key that is not a string is refused; the rest are counted
		// still, as Normalize may meet them first.
		ks, ok := k.(string)
		refused = refused || !ok
		n.size += len(ks) + keyBytes
		out[ks] = n.value(values[i], depth+1)
	}
	if refused {
		return n.refuse(NotJSON)
	}
	return out
}

func (n *refNormalizer) convert(v any, depth int) any {
	rv := reflect.ValueOf(v)
	switch x := v.(type) {
	case nil:
		return nil
	case time.Time:
		return n.str(x.Format(time.RFC3339Nano))
	case time.Duration:
		return n.str(x.String())
	case []byte:
		return n.str(string(x))
	}
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint())
	case reflect.Float32, reflect.Float64:
		return n.number(rv.Float())
	case reflect.String:
		return n.str(rv.String())
	case reflect.Slice, reflect.Array:
		items := make([]any, rv.Len())
		for i := range items {
			items[i] = rv.Index(i).Interface()
		}
		return n.array(items, depth)
	case reflect.Map:
		var keys, values []any
		for it := rv.MapRange(); it.Next(); {
			keys = append(keys, it.Key().Interface())
			values = append(values, it.Value().Interface())
		}
		return n.object(keys, values, depth)
	case reflect.Pointer:
		if rv.IsNil() {
			return nil
		}
		return n.value(rv.Elem().Interface(), depth+1)
	}
	return n.refuse(NotJSON)
}

// FuzzNormalize holds Normalize, which returns a value (or a part of one)
// as it is when it is already in JSON types, to a reference that builds a
// new value every time: the same value, or a refusal the reference found
// too; and normalising a normalised value returns that value itself.
func FuzzNormalize(f *testing.F) {
	for _, seed := range [][]byte{
		{0}, {1}, {2, 3}, {2, 4}, {3, 1}, {3, 4}, {3, 5}, {3, 7}, {4, 4}, {4, 3},
		{5, 0}, {5, 3, 2, 1, 3, 4}, {5, 2, 3, 0, 3, 2}, {6, 2, 0, 4, 1, 1, 5}, {7, 2, 1, 4, 2, 1, 1},
		{7, 2, 0, 4, 0, 0}, {8, 5}, {9, 3}, {10, 4}, {11, 2, 1}, {11, 11, 3, 4}, {12, 9}, {13, 7},
		{14, 9}, {15, 4}, {15, 2}, {16}, {17}, {18}, {19}, {20, 0, 0}, {20, 1, 0}, {20, 2, 0}, {20, 3, 0}, {20, 2, 5, 0},
		{21}, {22}, {23}, {5, 3, 6, 1, 0, 4, 3, 5, 2, 3, 2},
	} {
		f.Add(seed, uint16(0), uint8(0), uint8(0))
		f.Add(seed, uint16(9), uint8(2), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, maxBytes uint16, maxString, maxArray uint8) {
		v := (&valueReader{data}).value(0)
		l := ValueLimits{MaxBytes: int(maxBytes), MaxString: int(maxString), MaxArray: int(maxArray)}
		ref := refNormalizer{l: l, refused: map[ValueLimit]bool{}}
		want := ref.value(v, 0)
		if l.MaxBytes > 0 && ref.size > l.MaxBytes {
			ref.refused[OverBytes] = true
		}
		got, err := Normalize(v, l)
		var ve *ValueError
		switch {
		case err != nil && !errors.As(err, &ve):
			t.Fatalf("%#v: %v is not a *ValueError", v, err)
		case err != nil && !ref.refused[ve.Over]:
			t.Fatalf("%#v: refused (%v) for %d; the reference refuses for %v", v, err, ve.Over, ref.refused)
		case err == nil && len(ref.refused) > 0:
			t.Fatalf("%#v: normalised to %#v; the reference refuses for %v", v, got, ref.refused)
		case err == nil && !reflect.DeepEqual(got, want):
			t.Fatalf("%#v:\n got  %#v\n want %#v", v, got, want)
		}
		if err != nil {
			return
		}
		again, err := Normalize(got, l)
		if err != nil || !sameRef(again, got) {
			t.Fatalf("%#v: normalising its normal form %#v gave %#v, %v: want it as it is", v, got, again, err)
		}
	})
}

// sameRef reports whether a and b are the same value: the same array or
// object, not an equal copy.
func sameRef(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	return reflect.DeepEqual(a, b)
}
