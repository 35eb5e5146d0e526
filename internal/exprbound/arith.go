package exprbound

import (
	"fmt"
	"math"
	"math/big"
	"reflect"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm/runtime"
)

// expr computes integers as Go does: 9223372036854775807 + 1 wraps to the
// most negative integer, its optimiser folds constants the same way, sum
// adds with the same opcode, and int(1e19) converts out of range. The
// checked operations below refuse instead, with an *ArithmeticError; so do
// a division or a modulo by zero and a / or ** with no finite result (JSON
// has no NaN or ±Inf). Float + - * keep their result: they cannot wrap, and
// a float that overflows to ±Inf is refused where the value is written or
// read (it is not JSON).

// ArithmeticError is an operation whose result a 64-bit integer cannot
// hold, or that has no finite result: an integer overflow, a division or a
// modulo by zero.
type ArithmeticError struct {
	Message string
}

func (e *ArithmeticError) Error() string { return e.Message }

// fail raises err in the VM, which turns a panic into the program's error
// at the operation's position, as expr's own operations do: the checked
// operations have the signatures the VM calls without building a slice of
// arguments, which leaves no error result.
func fail(format string, args ...any) {
	panic(&ArithmeticError{Message: fmt.Sprintf(format, args...)})
}

func overflow(format string, args ...any) {
	fail("integer overflow: %s does not fit in a 64-bit integer (a float operand, such as 2.0, computes an approximate value)", fmt.Sprintf(format, args...))
}

// addInt, subInt, mulInt and negInt are Go's + - * and unary - of ints,
// reporting whether the result fits.
func addInt(x, y int) (int, bool) {
	s := x + y
	return s, (s > x) == (y > 0)
}

func subInt(x, y int) (int, bool) {
	d := x - y
	return d, (d < x) == (y > 0)
}

func mulInt(x, y int) (int, bool) {
	if x == 0 || y == 0 {
		return 0, true
	}
	if (x == -1 && y == math.MinInt) || (y == -1 && x == math.MinInt) {
		return 0, false
	}
	p := x * y
	return p, p/y == x
}

func negInt(x int) (int, bool) { return -x, x != math.MinInt }

// intOps are the checked integer operations, by operator.
var intOps = map[string]func(x, y int) (int, bool){"+": addInt, "-": subInt, "*": mulInt}

// checkedInt is x op y by f, refusing an overflow.
func checkedInt(x int, op string, y int, f func(x, y int) (int, bool)) int {
	r, ok := f(x, y)
	if !ok {
		overflow("%s %s %s", operand(x), op, operand(y))
	}
	return r
}

// add is + of numbers: floats and ints fast, the other kinds (a float and
// an int, a time and a duration) as expr adds them.
func add(a, b any) any {
	switch x := a.(type) {
	case float64:
		if y, ok := b.(float64); ok {
			return x + y
		}
	case int:
		if y, ok := b.(int); ok {
			return checkedInt(x, "+", y, addInt)
		}
	}
	return runtime.Add(a, b)
}

func sub(a, b any) any {
	switch x := a.(type) {
	case float64:
		if y, ok := b.(float64); ok {
			return x - y
		}
	case int:
		if y, ok := b.(int); ok {
			return checkedInt(x, "-", y, subInt)
		}
	}
	return runtime.Subtract(a, b)
}

func mul(a, b any) any {
	switch x := a.(type) {
	case float64:
		if y, ok := b.(float64); ok {
			return x * y
		}
	case int:
		if y, ok := b.(int); ok {
			return checkedInt(x, "*", y, mulInt)
		}
	}
	return runtime.Multiply(a, b)
}

func neg(a any) any {
	if x, ok := a.(int); ok {
		r, ok := negInt(x)
		if !ok {
			overflow("-(%d)", x)
		}
		return r
	}
	return runtime.Negate(a)
}

// mod is %; Go's x % -1 is 0 for every x, the most negative included.
func mod(a, b any) any {
	if isZero(b) {
		fail("modulo by zero: %s %% %s", operand(a), operand(b))
	}
	// JSON numbers read from the state are floats: a whole one is taken
	// as the integer it is, so that scopes.root.n % 2 works.
	x, xok := whole(a)
	y, yok := whole(b)
	if xok && yok {
		if y == -1 {
			return 0 // the most negative integer % -1 would trap
		}
		return int(x % y)
	}
	_, af := a.(float64)
	_, bf := b.(float64)
	if (af && !xok) || (bf && !yok) {
		fail("%s %% %s: %% takes whole numbers", operand(a), operand(b))
	}
	return runtime.Modulo(a, b)
}

// whole is v as an integer when it is an integer, or a float holding a
// whole number an int64 can hold.
func whole(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n == math.Trunc(n) && n >= -(1<<63) && n < 1<<63 {
			return int64(n), true
		}
	}
	return 0, false
}

// div is /, always a float in expr: the most negative integer / -1 is
// 9223372036854775808.0, not an overflow.
func div(a, b any) any {
	r := runtime.Divide(a, b)
	if !finite(r) {
		if isZero(b) {
			fail("division by zero: %s / %s", operand(a), operand(b))
		}
		fail("%s / %s has no finite result", operand(a), operand(b))
	}
	return r
}

func pow(a, b any) any {
	r := runtime.Exponent(a, b)
	if !finite(r) {
		fail("%s ** %s has no finite result", operand(a), operand(b))
	}
	return r
}

func abs(a any) any {
	if x, ok := a.(int); ok && x == math.MinInt {
		overflow("abs(%d)", x)
	}
	return builtin.Abs(a)
}

// toInt is int(): a float out of the int range (NaN too), or null, is
// refused instead of converted to whatever Go's conversion gives.
func toInt(a any) any {
	switch x := a.(type) {
	case nil:
		fail("int(null): int takes a number or a string of digits")
	case float64:
		// The float64 range of int: [-2^63, 2^63).
		if !(x >= -(1<<63) && x < 1<<63) {
			fail("int(%v): the number does not fit in a 64-bit integer", x)
		}
	}
	return builtin.Int(a)
}

// operand renders a number of a message as it would be written in an
// expression: a negative one in parentheses.
func operand(v any) string {
	switch x := v.(type) {
	case int:
		if x < 0 {
			return fmt.Sprintf("(%d)", x)
		}
	case float64:
		if x < 0 {
			return fmt.Sprintf("(%v)", x)
		}
	}
	return fmt.Sprint(v)
}

func isZero(v any) bool {
	switch x := v.(type) {
	case int:
		return x == 0
	case float64:
		return x == 0
	}
	return false
}

// finite reports whether v is not a float64 NaN or ±Inf.
func finite(v any) bool {
	f, ok := v.(float64)
	return !ok || !(math.IsNaN(f) || math.IsInf(f, 0))
}

// foldPass is the pass that runs on a checked tree before expr's optimiser,
// which would fold integer constants with wrapping and sum a range by a
// formula that wraps:
//
//   - a unary + of a number constant is the constant, so that nothing is
//     left for the optimiser to turn into one and fold unchecked;
//   - integer + - * and unary - of constants are folded here, checked; an
//     operation of constants that overflows, divides or takes a modulo by
//     zero, or has no finite result, becomes its checked call, so that it
//     fails where it runs (and only if it runs: `false ? 1 / 0 : 1` is 1);
//   - sum(a) and sum(a, p) become reduce(a, #acc + p, 0) with the checked
//     +, so that every addition is checked.
//
// Use it with ast.Walk before optimizer.Optimize.
type foldPass struct{ ops *operations }

// Visit folds or rewrites one node.
func (f foldPass) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.UnaryNode:
		if n.Operator == "+" {
			// +K is K: folded here, before the optimiser's own folding would
			// make it a constant and then fold the operation around it
			// unchecked (+9223372036854775807 + 1, +1 / 0).
			switch n.Node.(type) {
			case *ast.IntegerNode, *ast.FloatNode:
				ast.Patch(node, n.Node)
			}
			return
		}
		x, ok := n.Node.(*ast.IntegerNode)
		if !ok || n.Operator != "-" || x.Type().Kind() != reflect.Int {
			return
		}
		if r, ok := negInt(x.Value); ok {
			patchInt(node, r)
			return
		}
		replaceWithCall(node, f.ops.unary["-"], n.Node)
	case *ast.BinaryNode:
		f.binary(node, n)
	case *ast.BuiltinNode:
		if n.Name == "sum" {
			f.sumToReduce(node, n)
		}
	}
}

func (f foldPass) binary(node *ast.Node, n *ast.BinaryNode) {
	x, xInt := n.Left.(*ast.IntegerNode)
	y, yInt := n.Right.(*ast.IntegerNode)
	xInt = xInt && x.Type().Kind() == reflect.Int
	yInt = yInt && y.Type().Kind() == reflect.Int
	switch n.Operator {
	case "+", "-", "*":
		if !xInt || !yInt {
			return
		}
		if r, ok := intOps[n.Operator](x.Value, y.Value); ok {
			patchInt(node, r)
			return
		}
	case "%":
		if !yInt || y.Value != 0 {
			return
		}
	case "/", "**", "^":
		a, aok := constNumber(n.Left)
		b, bok := constNumber(n.Right)
		if !aok || !bok {
			return
		}
		r := a / b
		if n.Operator != "/" {
			r = math.Pow(a, b)
		}
		if finite(r) {
			return
		}
	default:
		return
	}
	replaceWithCall(node, f.ops.binary[n.Operator], n.Left, n.Right)
}

// constRange returns the bounds of m..n of integer constants.
func constRange(n ast.Node) (int, int, bool) {
	r, ok := n.(*ast.BinaryNode)
	if !ok || r.Operator != ".." {
		return 0, 0, false
	}
	m, mok := r.Left.(*ast.IntegerNode)
	k, kok := r.Right.(*ast.IntegerNode)
	if !mok || !kok {
		return 0, 0, false
	}
	return m.Value, k.Value, true
}

// rangeSum is the sum of m..n, and whether it fits in an int.
func rangeSum(m, n int) (int, bool) {
	if n < m {
		return 0, true
	}
	if d, ok := subInt(n, m); !ok || d == math.MaxInt {
		return 0, false // more items than an int counts, refused as the range is (rangeEnd)
	}
	lo, hi := big.NewInt(int64(m)), big.NewInt(int64(n))
	count := new(big.Int).Sub(hi, lo)
	count.Add(count, big.NewInt(1))
	sum := new(big.Int).Add(lo, hi)
	sum.Mul(sum, count).Quo(sum, big.NewInt(2))
	return int(sum.Int64()), sum.IsInt64()
}

func constNumber(n ast.Node) (float64, bool) {
	switch c := n.(type) {
	case *ast.IntegerNode:
		return float64(c.Value), true
	case *ast.FloatNode:
		return c.Value, true
	}
	return 0, false
}

var intType = reflect.TypeOf(0)

func patchInt(node *ast.Node, v int) {
	i := &ast.IntegerNode{Value: v}
	i.SetType(intType)
	ast.Patch(node, i)
}

// sumToReduce rewrites sum(a[, p]) as reduce(a, #acc + p, 0) with the
// checked +, and sum(map(a, p)) as the optimiser would fuse it, without the
// array. The sum of a range of constants is folded, as the optimiser would
// (without building the range), checked.
func (f foldPass) sumToReduce(node *ast.Node, n *ast.BuiltinNode) {
	loc := n.Location()
	arr := n.Arguments[0]
	if m, k, ok := constRange(arr); ok && len(n.Arguments) == 1 {
		if sum, ok := rangeSum(m, k); ok {
			patchInt(node, sum)
		} else {
			replaceWithCall(node, func(any) any {
				overflow("sum(%d..%d)", m, k)
				return nil
			}, typed(&ast.NilNode{}, anyType, loc))
		}
		return
	}
	var item ast.Node
	if len(n.Arguments) == 2 {
		item = n.Arguments[1].(*ast.PredicateNode).Node
	} else if m, ok := arr.(*ast.BuiltinNode); ok && m.Name == "map" && len(m.Arguments) == 2 {
		arr, item = m.Arguments[0], m.Arguments[1].(*ast.PredicateNode).Node
	} else {
		item = typed(&ast.PointerNode{}, anyType, loc)
	}
	acc := typed(&ast.PointerNode{Name: "acc"}, anyType, loc)
	body := typed(&ast.PredicateNode{Node: newCall(f.ops.binary["+"], anyType, loc, acc, item)}, anyType, loc)
	zero := typed(&ast.IntegerNode{Value: 0}, intType, loc)
	reduce := typed(&ast.BuiltinNode{Name: "reduce", Arguments: []ast.Node{arr, body, zero}}, n.Type(), loc)
	ast.Patch(node, reduce)
}
