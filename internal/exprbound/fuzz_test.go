package exprbound_test

// Fuzz targets with an oracle for the fast paths of compiling and running:
// the constants folded at compile time, the bounded string operations that
// count characters only when the bytes are over, and the program cache and
// VM pool. Each input goes through the fast path and through the slow one
// (or a plain reference written here), and the two must agree.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/exprd/exprd/internal/exprbound"
)

// fuzzEnv is an environment of the sandbox's names, with what its
// meter's functions charge: nothing.
func fuzzEnv(vars map[string]any) map[string]any {
	env := map[string]any{
		exprbound.TickName:  func() bool { return true },
		exprbound.AllocName: func(v any) any { return v }, exprbound.AllocDeepName: func(v any) any { return v },
		exprbound.MeterName: (*exprbound.Meter)(nil),
	}
	for k, v := range vars {
		env[k] = v
	}
	return env
}

// result is what a program gave: its value, or its error.
type result struct {
	val any
	err error
}

// compileRun compiles src in the sandbox and runs it on env in a new VM.
func compileRun(src string, env any, l exprbound.Limits) result {
	p, err := exprbound.Compile(src, env, l, recorder(new([]string)))
	if err != nil {
		return result{err: err}
	}
	out, err := expr.Run(p, env)
	return result{out, err}
}

// arithClassOf is the wording class of a run's arithmetic refusal: the
// *ArithmeticError's message up to its first colon ("integer overflow",
// "division by zero"), the rest being its operands; another error is its
// whole message.
func arithClassOf(err error) string {
	var ae *exprbound.ArithmeticError
	if errors.As(err, &ae) {
		class, _, _ := strings.Cut(ae.Message, ":")
		if strings.Contains(ae.Message, "no finite result") {
			return "no finite result"
		}
		return class
	}
	return fmt.Sprint(err)
}

// literal writes v as an expression of constants.
func literal(v int64) string {
	switch {
	case v == math.MinInt64:
		return "(-9223372036854775807 - 1)"
	case v < 0:
		return fmt.Sprintf("(-%d)", -v)
	}
	return fmt.Sprint(v)
}

// sameResult compares two results: values equal (NaN to NaN), errors of
// the same class.
func sameResult(a, b result) bool {
	if (a.err == nil) != (b.err == nil) {
		return false
	}
	if a.err != nil {
		return arithClassOf(a.err) == arithClassOf(b.err)
	}
	x, xok := a.val.(float64)
	y, yok := b.val.(float64)
	if xok && yok && math.IsNaN(x) && math.IsNaN(y) {
		return true
	}
	return reflect.DeepEqual(a.val, b.val)
}

// FuzzConstFold holds the operations of constants, which the sandbox
// folds at compile time (checked, and a sum of a range by its formula), to
// the same operations of variables, computed when the program runs: the
// same value, or a refusal of the same class (an overflow folded is
// refused when it runs, as the variables' is).
func FuzzConstFold(f *testing.F) {
	edges := []int64{0, 1, -1, 2, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 3037000500, -3037000500, 1 << 62}
	for i, x := range edges {
		for j, y := range edges {
			f.Add(x, y, uint8(i*len(edges)+j))
		}
	}
	ops := []string{"+", "-", "*", "/", "%", "**"}
	f.Fuzz(func(t *testing.T, x, y int64, op uint8) {
		var folded, run string
		env := fuzzEnv(map[string]any{"x": int(x), "y": int(y)})
		switch k := int(op) % (len(ops) + 3); {
		case k < len(ops):
			folded, run = literal(x)+" "+ops[k]+" "+literal(y), "x "+ops[k]+" y"
		case k == len(ops):
			folded, run = "-"+literal(x), "-x"
		case k == len(ops)+1:
			// A range of no items, or of more than an int counts: nothing
			// is built either way (MaxInt..MinInt, MinInt..MaxInt).
			count := new(big.Int).Sub(big.NewInt(y), big.NewInt(x))
			if count.Sign() >= 0 && count.Cmp(big.NewInt(math.MaxInt64)) < 0 {
				return
			}
			folded, run = "sum("+literal(x)+".."+literal(y)+")", "sum(x..y)"
		default:
			// A range of up to 255 items, which the variables' sum adds one
			// by one.
			width := int64(y & 0xff)
			if x > math.MaxInt64-width {
				x = math.MaxInt64 - width
			}
			env["x"], env["y"] = int(x), int(x+width)
			folded, run = "sum("+literal(x)+".."+literal(x+width)+")", "sum(x..y)"
		}
		got, want := compileRun(folded, env, exprbound.Limits{}), compileRun(run, env, exprbound.Limits{})
		if !sameResult(got, want) {
			t.Fatalf("%s gave %v, %v; %s with x=%v, y=%v gave %v, %v", folded, got.val, got.err, run, env["x"], env["y"], want.val, want.err)
		}
	})
}

// A range is what its expression says, empty or refused where expr's ..
// would wrap: MaxInt..MinInt is empty, not [MaxInt, MinInt]; MinInt..MaxInt
// and -1..MaxInt have more items than an int counts, not none.
func TestRangeEnds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		x, y int
		want any // an error's class, or the value
	}{
		{"len(x..y)", math.MaxInt, math.MinInt, 0},
		{"x..y", math.MaxInt, math.MinInt, []int{}},
		{"x..y", math.MaxInt - 1, math.MaxInt, []int{math.MaxInt - 1, math.MaxInt}},
		{"x..y", math.MinInt, math.MinInt + 1, []int{math.MinInt, math.MinInt + 1}},
		{"len(x..y)", math.MinInt, math.MaxInt, "integer overflow"},
		{"len(x..y)", -1, math.MaxInt, "integer overflow"},
		{"len(x..y)", math.MinInt, 0, "integer overflow"},
		{"x..y", 1, 3, []int{1, 2, 3}},
		{"x..y", 3, 1, []int{}},
		{"map(x..y, # .. 3)", 1, 2, []any{[]int{1, 2, 3}, []int{2, 3}}},
		{"(x..y)[0] .. len(x..y)", 2, 5, []int{2, 3, 4}},
		{"sum(x..y)", math.MaxInt - 1, math.MaxInt, "integer overflow"},
		{"x in x..y", math.MaxInt, math.MinInt, false},
	}
	for _, tt := range tests {
		got := compileRun(tt.src, fuzzEnv(map[string]any{"x": tt.x, "y": tt.y}), exprbound.Limits{})
		if class, ok := tt.want.(string); ok {
			if got.err == nil || arithClassOf(got.err) != class {
				t.Errorf("%s with x=%d, y=%d: got %v, %v; want %s", tt.src, tt.x, tt.y, got.val, got.err, class)
			}
			continue
		}
		if got.err != nil || !reflect.DeepEqual(got.val, tt.want) {
			t.Errorf("%s with x=%d, y=%d: got %#v, %v; want %#v", tt.src, tt.x, tt.y, got.val, got.err, tt.want)
		}
	}
}

// tooLong is the error of a string over the limit in FuzzStringBounds.
type tooLong struct{ what string }

func (e *tooLong) Error() string { return e.what }

// FuzzStringBounds holds the bounded string operations, which count a
// string's characters only when its bytes are over the limit and refuse
// one before building it, to a reference that builds the string and counts
// its characters: the same string, or a refusal exactly when it would be
// over the limit.
func FuzzStringBounds(f *testing.F) {
	strs := []string{"", "a", "ab", "é", "日本", "\xff", "a\xffb", strings.Repeat("x", 40), strings.Repeat("é", 20)}
	for i, s := range strs {
		for j, u := range strs {
			f.Add(s, u, strs[(i+j)%len(strs)], int64(i*j), uint8(8*i+j), uint8(i+j))
		}
	}
	f.Add("ab", "", "", int64(math.MaxInt64), uint8(10), uint8(0))
	f.Add("", "", "", int64(math.MaxInt64), uint8(10), uint8(0))
	f.Add("é", "", "", int64(math.MinInt64), uint8(10), uint8(0))
	f.Add("abc", "", "xy", int64(0), uint8(4), uint8(2))
	f.Fuzz(func(t *testing.T, s, u, r string, n int64, limit, op uint8) {
		max := int(limit) + 1
		l := exprbound.Limits{
			MaxString: max,
			TooLong:   func(what string) error { return &tooLong{what} },
			Normalize: func(v any) (any, error) { return exprbound.Normalize(v, exprbound.ValueLimits{}) },
		}
		env := fuzzEnv(map[string]any{"s": s, "u": u, "r": r, "n": int(n)})
		var src, want string
		refused := false
		switch op % 5 {
		case 0:
			if n < 0 {
				// A negative count is a plain error, not a bound.
				got := compileRun("repeat(s, n)", env, l)
				if got.err == nil || errors.As(got.err, new(*tooLong)) {
					t.Fatalf("repeat(%q, %d): got %q, %v; want the negative count refused", s, n, got.val, got.err)
				}
				return
			}
			// A string of more bytes than 4 a character is over the limit;
			// a shorter one is built and counted.
			src = "repeat(s, n)"
			bytes := new(big.Int).Mul(big.NewInt(int64(len(s))), big.NewInt(n))
			if bytes.Cmp(big.NewInt(int64(utf8.UTFMax*max))) > 0 {
				refused = true
			} else {
				want = strings.Repeat(s, int(n))
			}
		case 1:
			src, want = "join([s, u, s], r)", strings.Join([]string{s, u, s}, r)
		case 2:
			src, want = "replace(s, u, r)", strings.Replace(s, u, r, -1)
		case 3:
			src, want = "s + u", s+u
		default:
			out, err := json.MarshalIndent(s+u, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			src, want = "toJSON(s + u)", string(out)
			refused = utf8.RuneCountInString(s+u) > max
		}
		refused = refused || utf8.RuneCountInString(want) > max
		got := compileRun(src, env, l)
		if errors.As(got.err, new(*tooLong)) != refused || (!refused && (got.err != nil || got.val != want)) {
			t.Fatalf("%s with s=%q u=%q r=%q n=%d, at most %d characters: got %q, %v; want %q, refused %v", src, s, u, r, n, max, got.val, got.err, want, refused)
		}
	})
}

// pooledPrograms are the programs FuzzPooledRun runs one after the other
// in a pooled VM: some that fail halfway (leaving a stack, scopes,
// variables and a memory count behind), some that declare variables, some
// that allocate past the memory budget.
var pooledPrograms = []string{
	"n + 1",
	"9223372036854775807 + n",
	"1 / (n - n)",
	"let a = [n, n + 1]; a[5]",
	"map(1..n % 100, # * 2)",
	"reduce(1..n % 50, #acc + #, 0)",
	"filter(1..n % 100, # % 3 == 0)",
	"let x = n; let y = x * 2; y - x",
	"sortBy([3, n, 2, 1], #)",
	"sort([n, 1, n - 1], \"desc\")",
	"uniq([n, 1, n, 1.0])",
	"repeat(\"ab\", n % 10)",
	"{\"a\": n}.a",
	"string(n)",
	"toJSON({\"k\": [n]})",
	"n > 0 ? 1 / 0 : -n",
	"int(1e19) + n",
	"map(1..3, [#, n])",
	"groupBy(1..n % 10, # % 2)",
	"[1, 2, 3][n % 5]",
	"abs(n)",
	"let f = n; map(1..3, f + #)",
	"let a = 1..n % 300; len(a)",
	"sum(1..n % 1000)",
}

// FuzzPooledRun holds a run of a cached program in a pooled VM, which the
// runs before it used (failing halfway, some of them), to a run of the
// same source compiled afresh in a new VM: the same value or the same
// error, run after run.
func FuzzPooledRun(f *testing.F) {
	f.Add([]byte{0, 1, 0}, int64(1), uint16(0))
	f.Add([]byte{3, 7, 3, 7}, int64(5), uint16(0))
	f.Add([]byte{2, 0, 15, 21}, int64(-1), uint16(0))
	f.Add([]byte{4, 4, 6, 22}, int64(99), uint16(60))
	f.Add([]byte{1, 16, 8, 9, 10}, int64(math.MaxInt64), uint16(0))
	f.Add([]byte{1, 16, 8, 9, 10}, int64(math.MinInt64), uint16(0))
	f.Add([]byte{17, 18, 22, 23, 5, 17}, int64(299), uint16(40))
	f.Add([]byte{11, 12, 13, 14, 19, 20}, int64(7), uint16(1))
	l := exprbound.Limits{
		MaxString: 100,
		TooLong:   func(what string) error { return &tooLong{what} },
		Normalize: func(v any) (any, error) { return exprbound.Normalize(v, exprbound.ValueLimits{}) },
	}
	f.Fuzz(func(t *testing.T, seq []byte, n int64, budget uint16) {
		if len(seq) > 16 {
			return
		}
		env := fuzzEnv(map[string]any{"n": int(n)})
		cache, err := exprbound.NewCache[string, *vm.Program](4)
		if err != nil {
			t.Fatal(err)
		}
		var vms exprbound.VMs
		for _, b := range seq {
			src := pooledPrograms[int(b)%len(pooledPrograms)]
			p, ok := cache.Get(src)
			if !ok {
				if p, err = exprbound.Compile(src, env, l, recorder(new([]string))); err != nil {
					t.Fatalf("%s: %v", src, err)
				}
				cache.Add(src, p)
			}
			got, gotErr := vms.Run(p, env, uint(budget))
			fresh, err := exprbound.Compile(src, env, l, recorder(new([]string)))
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := (&vm.VM{MemoryBudget: uint(budget)}).Run(fresh, env)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s after %v with n=%d: pooled %#v, %v; fresh %#v, %v", src, seq, n, got, gotErr, want, wantErr)
			}
		}
	})
}

// FuzzMatches holds `s matches "constant"`, whose pattern the sandbox
// compiles once with the program, to `s matches p` of the same pattern
// known only at run time, compiled when it runs: the same answer, or both
// refused (an invalid pattern is refused when compiling the first, when
// running the second).
func FuzzMatches(f *testing.F) {
	for _, seed := range [][2]string{
		{"", ""}, {"abc", "^a"}, {"abc", "c$"}, {"é", "^.$"}, {"\xff", "^.$"}, {"\xff", "\\xff"},
		{"aaa", "(a+)+$"}, {"x", "["}, {"x", "(?i)X"}, {"a\nb", "^b"}, {"a\nb", "(?m)^b"}, {"", "a*"},
	} {
		f.Add(seed[0], seed[1])
	}
	l := exprbound.Limits{MaxString: 100, TooLong: func(what string) error { return &tooLong{what} }}
	f.Fuzz(func(t *testing.T, s, pattern string) {
		if strings.Contains(pattern, "`") || len(pattern) > exprbound.MaxPatternLength {
			return // a raw string literal cannot hold it; a pattern this long is refused built at run time
		}
		env := fuzzEnv(map[string]any{"s": s, "p": pattern})
		constant := compileRun("s matches `"+pattern+"`", env, l)
		dynamic := compileRun("s matches p", env, l)
		if (constant.err == nil) != (dynamic.err == nil) || constant.val != dynamic.val {
			t.Fatalf("%q matches %q: constant %v, %v; at run time %v, %v", s, pattern, constant.val, constant.err, dynamic.val, dynamic.err)
		}
	})
}

// FuzzDivideByConstant holds x / K for a constant K of magnitude 1 or
// more, which the sandbox leaves to expr's own / (it cannot make a finite
// number infinite), to x / k of the same k known at run time, which goes
// through the checked /: the same value, for every finite x, float or int.
func FuzzDivideByConstant(f *testing.F) {
	for _, seed := range []struct {
		x float64
		i int64
		k float64
	}{
		{0, 0, 1}, {math.MaxFloat64, math.MaxInt64, 1}, {-math.MaxFloat64, math.MinInt64, -1}, {math.MaxFloat64, math.MinInt64, 1.0000000000000002},
		{math.SmallestNonzeroFloat64, 1, math.MaxFloat64}, {math.Copysign(0, -1), -1, -2}, {1, 3, 3}, {1e308, 7, 0.5}, {1e308, 7, 0},
	} {
		f.Add(seed.x, seed.i, seed.k)
	}
	f.Fuzz(func(t *testing.T, x float64, i int64, k float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(k) || math.IsInf(k, 0) {
			return // no JSON value is, and no literal writes one
		}
		lit := strconv.FormatFloat(math.Abs(k), 'g', -1, 64)
		if !strings.ContainsAny(lit, ".e") {
			lit += ".0" // a float constant, as k is
		}
		if math.Signbit(k) {
			lit = "(-" + lit + ")"
		}
		env := fuzzEnv(map[string]any{"x": x, "i": int(i), "k": k})
		for _, v := range []string{"x", "i"} {
			constant, variable := compileRun(v+" / "+lit, env, exprbound.Limits{}), compileRun(v+" / k", env, exprbound.Limits{})
			if !sameResult(constant, variable) {
				t.Fatalf("%s / %s with %s=%v: %v, %v; / k: %v, %v", v, lit, v, env[v], constant.val, constant.err, variable.val, variable.err)
			}
		}
	})
}
