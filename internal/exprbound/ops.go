package exprbound

import (
	"math"
	"reflect"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm/runtime"
)

// operations are the bounded and checked operators and builtins, called
// from the program as constants of the types func(any, any) any and
// func(any) any, which the VM calls directly: a function declared with
// expr.Function takes its arguments as a slice, which costs an allocation
// per call inside a loop.
type operations struct {
	binary map[string]func(a, b any) any // by operator
	unary  map[string]func(a any) any    // "-", and the builtins abs and int
	bounds bounds
}

func newOperations(l Limits) *operations {
	return &operations{
		bounds: bounds{l},
		binary: map[string]func(a, b any) any{
			"+": bounds{l}.add, "-": sub, "*": mul, "%": mod, "/": div, "**": pow, "^": pow,
		},
		unary: map[string]func(a any) any{"-": neg, "abs": abs, "int": toInt},
	}
}

// opsPass is the pass that swaps the unbounded and unchecked operations of a
// checked, optimised tree:
//
//   - + of strings, and + - * % of integers or of values whose type is
//     known only at run time (float + - * keep expr's opcodes);
//   - every / and **, but / by a constant of magnitude 1 or more, which
//     cannot make a finite number infinite;
//   - unary - of an integer or of a value of unknown type;
//   - the builtins that build strings, abs and int, sortBy and sort;
//   - every range m..n, whose end is checked (checkedRange).
type opsPass struct{ ops *operations }

// Visit swaps one node; use it with ast.Walk on a checked, optimised tree.
// ast.Walk does not descend into a builtin's Map, the body of a map that
// the optimiser fused into the filter before it (map(filter(xs, p), b)
// runs b in filter's loop), so Visit walks it: the body's operations are
// swapped like any other.
func (o opsPass) Visit(node *ast.Node) {
	if n, ok := (*node).(*ast.BuiltinNode); ok && n.Map != nil {
		ast.Walk(&n.Map, o)
	}
	if n, ok := (*node).(*ast.BinaryNode); ok && n.Operator == ".." {
		checkedRange(node, n)
		return
	}
	alloc := allocates(*node)
	o.swap(node)
	if alloc != "" {
		wrapAlloc(node, alloc)
	}
}

// swap swaps one node's operation.
func (o opsPass) swap(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.MemberNode:
		if fastMember(n) {
			replaceWithCall(node, fetch, n.Node, n.Property)
		}
	case *ast.BinaryNode:
		if n.Operator == "matches" {
			o.ops.bounds.swapMatches(node, n)
		} else if swapBinary(n) {
			replaceWithCall(node, o.ops.binary[n.Operator], n.Left, n.Right)
		}
	case *ast.UnaryNode:
		if k := n.Type().Kind(); n.Operator == "-" && (k == reflect.Int || k == reflect.Interface) {
			replaceWithCall(node, o.ops.unary["-"], n.Node)
		}
	case *ast.BuiltinNode:
		if name, ok := boundedBuiltins[n.Name]; ok {
			ast.Patch(node, newNamedCall(name, n.Type(), n.Location(), n.Arguments...))
		} else if f, ok := o.ops.unary[n.Name]; ok && len(n.Arguments) == 1 {
			replaceWithCall(node, f, n.Arguments[0])
		} else if n.Name == "uniq" && len(n.Arguments) == 1 {
			ast.Patch(node, newNamedCall(uniqName, n.Type(), n.Location(), n.Arguments[0], meterRef(n.Location())))
		} else if n.Name == "sortBy" || n.Name == "sort" {
			stableSort(node, n)
		}
	}
}

// fastMember reports whether n reads a member that may be a JSON value's at
// run time: not optional (its compiled jump must stay), by a constant name
// or index, of a value whose type is unknown or the JSON object's or
// array's. expr reads such a member with runtime.Fetch, through reflect;
// [fetch] reads a map[string]any or an []any directly.
func fastMember(n *ast.MemberNode) bool {
	if n.Optional || n.Method {
		return false
	}
	t := n.Node.Type()
	if t == nil {
		return false
	}
	switch n.Property.(type) {
	case *ast.StringNode:
		return t.Kind() == reflect.Interface || t == jsonObject
	case *ast.IntegerNode:
		return t.Kind() == reflect.Interface || t == jsonArray
	}
	return false
}

var (
	jsonObject = reflect.TypeFor[map[string]any]()
	jsonArray  = reflect.TypeFor[[]any]()
)

// fetch is runtime.Fetch, a JSON object's member and a JSON array's item
// read first: a decoded state is maps and slices all the way down, and
// runtime.Fetch reaches each through reflect, several times slower.
// Anything else, an index out of range and a missing value's panics too,
// is runtime.Fetch's. A missing key is nil, and a negative index counts
// from the end, as there.
func fetch(from, key any) any {
	switch x := from.(type) {
	case map[string]any:
		if k, ok := key.(string); ok {
			return x[k]
		}
	case []any:
		if i, ok := key.(int); ok {
			if i < 0 {
				i += len(x)
			}
			if i >= 0 && i < len(x) {
				return x[i]
			}
		}
	}
	return runtime.Fetch(from, key)
}

// swapBinary reports whether n's operation is swapped for its bounded or
// checked version.
func swapBinary(n *ast.BinaryNode) bool {
	k := n.Type().Kind()
	intOrUnknown := k == reflect.Int || k == reflect.Interface
	switch n.Operator {
	case "+":
		return intOrUnknown || k == reflect.String
	case "-", "*", "%":
		return intOrUnknown
	case "/":
		d, ok := constNumber(n.Right)
		return !ok || (d > -1 && d < 1)
	case "**", "^":
		return true
	}
	return false
}

// replaceWithCall replaces node with a call of fn on args.
func replaceWithCall(node *ast.Node, fn any, args ...ast.Node) {
	ast.Patch(node, newCall(fn, (*node).Type(), (*node).Location(), args...))
}

// newCall is a call of the function value fn, of type t.
func newCall(fn any, t reflect.Type, loc file.Location, args ...ast.Node) *ast.CallNode {
	callee := typed(&ast.ConstantNode{Value: fn}, reflect.TypeOf(fn), loc)
	return typed(&ast.CallNode{Callee: callee, Arguments: args}, t, loc)
}

// newNamedCall is a call of the operation name, declared with
// expr.Function (Functions), of type t.
func newNamedCall(name string, t reflect.Type, loc file.Location, args ...ast.Node) *ast.CallNode {
	callee := typed(&ast.IdentifierNode{Value: name}, variadicFunc, loc)
	return typed(&ast.CallNode{Callee: callee, Arguments: args}, t, loc)
}

// typed sets n's type and location.
func typed[N ast.Node](n N, t reflect.Type, loc file.Location) N {
	n.SetType(t)
	n.SetLocation(loc)
	return n
}

// rangeFromVar holds a range's start while its end is checked.
const rangeFromVar = ReservedPrefix + "rangeFrom"

// checkedRange rewrites m..n, charged to the meter, as
//
//	let __rangeFrom = m; __alloc(__rangeFrom..rangeEnd(__rangeFrom, n))
//
// expr's .. counts a range's items as n - m + 1 and its items as m + i,
// wrapping: MinInt..MaxInt and -1..MaxInt are empty, and MaxInt..MinInt is
// [MaxInt, MinInt]. rangeEnd refuses a range of more items than an int
// counts, and makes the end of an empty one m - 1, so that .. builds the
// range the expression says, or nothing, still under the VM's memory
// budget, which .. charges before it builds.
func checkedRange(node *ast.Node, n *ast.BinaryNode) {
	loc := n.Location()
	from := func() ast.Node {
		return typed(&ast.IdentifierNode{Value: rangeFromVar}, n.Left.Type(), n.Left.Location())
	}
	var rng ast.Node = typed(&ast.BinaryNode{Operator: "..", Left: from(), Right: newCall(rangeEnd, intType, loc, from(), n.Right)}, n.Type(), loc)
	wrapAlloc(&rng, AllocName)
	ast.Patch(node, typed(&ast.VariableDeclaratorNode{Name: rangeFromVar, Value: n.Left, Expr: rng}, n.Type(), loc))
}

// rangeEnd is the end of the range m..n that expr's .. builds as written:
// n, m - 1 when the range is empty, or a refusal when it has more items
// than an int counts.
func rangeEnd(m, n any) any {
	lo, hi := runtime.ToInt(m), runtime.ToInt(n)
	if hi < lo {
		return lo - 1
	}
	if d, ok := subInt(hi, lo); !ok || d == math.MaxInt {
		overflow("the count of the items of %d..%d", lo, hi)
	}
	return hi
}
