package exprbound

import (
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
}

func newOperations(l Limits) *operations {
	return &operations{
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
//   - the builtins that build strings, abs and int, sortBy and sort.
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
	switch n := (*node).(type) {
	case *ast.MemberNode:
		if fastMember(n) {
			replaceWithCall(node, fetch, n.Node, n.Property)
		}
	case *ast.BinaryNode:
		if swapBinary(n) {
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
		} else if n.Name == "sortBy" || n.Name == "sort" {
			stableSort(node, n)
		}
	}
}

// fastMember reports whether n is a member access by name on a value that
// may be a JSON object at run time: not optional (its compiled jump must
// stay), its property a name, its value's type unknown or map[string]any.
// expr fetches such a member with runtime.Fetch, through reflect; [fetch]
// reads a map[string]any directly.
func fastMember(n *ast.MemberNode) bool {
	if n.Optional || n.Method {
		return false
	}
	if _, ok := n.Property.(*ast.StringNode); !ok {
		return false
	}
	t := n.Node.Type()
	return t != nil && (t.Kind() == reflect.Interface || t == jsonObject)
}

var jsonObject = reflect.TypeFor[map[string]any]()

// fetch is runtime.Fetch, a JSON object's member read first: a decoded
// state is maps of strings all the way down, and runtime.Fetch reaches
// each through reflect, several times slower. Anything else, a missing
// value's panic too, is runtime.Fetch's. A missing key is nil, as there.
func fetch(from, key any) any {
	if m, ok := from.(map[string]any); ok {
		if k, ok := key.(string); ok {
			return m[k]
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
