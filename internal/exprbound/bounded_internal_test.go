package exprbound

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/expr-lang/expr/ast"
)

// sources are the strings under the keys "read" and "expr" anywhere in a
// decoded JSON document: the programs of a table of calls.
func sources(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "read" || k == "expr") {
				out = append(out, s)
			}
			out = append(out, sources(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, sources(x)...)
		}
	}
	return out
}

// everyNode calls visit on n and on every node under it, reached through
// every field of type ast.Node or []ast.Node by reflection: not ast.Walk,
// which skips fields the optimiser fills (a builtin's Map), so that a node
// it hides cannot hide from this check too.
func everyNode(n ast.Node, visit func(ast.Node)) {
	if n == nil || reflect.ValueOf(n).IsNil() {
		return
	}
	visit(n)
	v := reflect.ValueOf(n).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); {
		case f.Type() == nodeType:
			if !f.IsNil() {
				everyNode(f.Interface().(ast.Node), visit)
			}
		case f.Type() == nodesType:
			for _, c := range f.Interface().([]ast.Node) {
				everyNode(c, visit)
			}
		}
	}
}

var (
	nodeType  = reflect.TypeFor[ast.Node]()
	nodesType = reflect.TypeFor[[]ast.Node]()
)

// unbounded lists what the sandbox left as expr has it in a compiled
// tree: an operation opsPass swaps, a sum the fold pass rewrites, or a
// predicate body that does not count its iteration first. The only bodies
// without a count are the sandbox's own, run once an item of an array
// that already exists: the stable sort's key of sort(xs), the item, and
// sum(xs)'s checked #acc + #.
//
// It also lists what builds a value uncharged: a node that allocates (a
// builtin that builds, + of strings, a range, a literal) that is not the
// argument of the meter's AllocName or AllocDeepName. The one exception is
// the sandbox's own array of a stable sort's keys (map(__sorting, ...)),
// as large as the sorted array the sort's charge counts.
func unbounded(root ast.Node) []string {
	var found []string
	counted := func(body ast.Node, where string) {
		if !ticked(body) && !trivial(body) {
			found = append(found, fmt.Sprintf("%s at %v does not count its iterations", where, body.Location()))
		}
	}
	charged := map[ast.Node]bool{}
	everyNode(root, func(n ast.Node) {
		if c, ok := n.(*ast.CallNode); ok && len(c.Arguments) == 1 {
			if id, ok := c.Callee.(*ast.IdentifierNode); ok && (id.Value == AllocName || id.Value == AllocDeepName) {
				charged[c.Arguments[0]] = true
			}
		}
	})
	everyNode(root, func(n ast.Node) {
		if allocates(n) != "" && !charged[n] && !sortKeys(n) {
			found = append(found, fmt.Sprintf("%T at %v builds a value the meter does not charge", n, n.Location()))
		}
		switch n := n.(type) {
		case *ast.BinaryNode:
			if swapBinary(n) || n.Operator == "matches" {
				found = append(found, fmt.Sprintf("%s at %v is expr's own", n.Operator, n.Location()))
			}
		case *ast.UnaryNode:
			if k := n.Type().Kind(); n.Operator == "-" && (k == reflect.Int || k == reflect.Interface) {
				found = append(found, fmt.Sprintf("unary - at %v is expr's own", n.Location()))
			}
		case *ast.BuiltinNode:
			_, bounded := boundedBuiltins[n.Name]
			_, unary := newOperations(Limits{}).unary[n.Name]
			if bounded || unary || n.Name == "sortBy" || n.Name == "sort" || n.Name == "sum" || n.Name == "uniq" {
				found = append(found, fmt.Sprintf("builtin %s at %v is expr's own", n.Name, n.Location()))
			}
			if n.Map != nil {
				counted(n.Map, "the fused map body")
			}
		case *ast.PredicateNode:
			counted(n.Node, "the predicate")
		}
	})
	return found
}

// sortKeys reports whether n is the stable sort's array of keys.
func sortKeys(n ast.Node) bool {
	b, ok := n.(*ast.BuiltinNode)
	if !ok || b.Name != "map" || len(b.Arguments) == 0 {
		return false
	}
	id, ok := b.Arguments[0].(*ast.IdentifierNode)
	return ok && id.Value == sortingVar
}

// ticked reports whether body counts its iteration before anything else:
// the patched `__tick(); body`, or a body the sandbox or the optimiser built
// around one, evaluated first: the checked #acc + (counted body) of
// sum(xs, p), and the && or || that combines two predicates (all(xs, p) &&
// all(xs, q), filter(filter(xs, p), q)).
func ticked(body ast.Node) bool {
	switch b := body.(type) {
	case *ast.SequenceNode:
		if len(b.Nodes) == 0 {
			return false
		}
		c, ok := b.Nodes[0].(*ast.CallNode)
		if !ok {
			return false
		}
		id, ok := c.Callee.(*ast.IdentifierNode)
		return ok && id.Value == TickName
	case *ast.CallNode:
		if _, ok := b.Callee.(*ast.ConstantNode); !ok || len(b.Arguments) != 2 {
			return false
		}
		_, acc := b.Arguments[0].(*ast.PointerNode)
		return acc && ticked(b.Arguments[1])
	case *ast.BinaryNode:
		switch b.Operator {
		case "&&", "||", "and", "or":
			return ticked(b.Left)
		}
	}
	return false
}

// trivial reports whether body is one of the sandbox's bodies that do not
// count: the item itself, or a checked operation of pointers (#acc + #).
func trivial(body ast.Node) bool {
	switch b := body.(type) {
	case *ast.PointerNode:
		return true
	case *ast.CallNode:
		if _, ok := b.Callee.(*ast.ConstantNode); !ok {
			return false
		}
		for _, a := range b.Arguments {
			if _, ok := a.(*ast.PointerNode); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// FuzzCompiledIsBounded compiles programs and holds the compiled tree,
// every node of it, to the sandbox: every operation swapped, every
// predicate counted. Its seeds are the shapes expr's optimiser rewrites and
// every program of the evaluator's table of calls.
func FuzzCompiledIsBounded(f *testing.F) {
	for _, src := range []string{
		`map(filter(xs, # > 1), # * 2)`,
		`map(filter(xs, # > 1), # * 2)[0]`,
		`last(map(filter(xs, # > 1), -#))`,
		`first(map(filter(xs, true), repeat("a", #)))`,
		`sum(map(xs, # * #))`,
		`sum([n, n * 2, n - 1])`,
		`len(filter(xs, # % 2 == 0))`,
		`count(xs, # > 1) > 2`,
		`all(xs, # > 1) && all(xs, # < n * 3)`,
		`any(xs, # > 1) || any(xs, # + 1 < 0)`,
		`none(xs, # > 1) && none(xs, # ** 2 > 10)`,
		`sortBy(map(xs, {"k": # * 2}), .k, "desc")`,
		`sort(map(xs, -#))`,
		`reduce(xs, #acc + # * n, 0)`,
		`groupBy(xs, # % 3)`,
		`abs(n) + int(s) + n / 2`,
		`map(filter(xs, # > 0), join(map(filter(ys, true), string(#)), s + s))`,
		`let f = n * 2; map(filter(xs, # > f), toJSON(# / f))`,
		`n in 1..10 ? n % 3 : replace(s, "a", "b")`,
		`len(map(filter(xs, f(#) > 0), # * n))`,
		`uniq(map(xs, [#, s + s]))`,
		`s matches "a+" && s matches s + "b"`,
		`fromJSON(toJSON({"a": xs}))`,
		`toPairs({"a": 1})[0]`,
		`concat(xs, 1..n, flatten([[1], ys]))`,
		`keys({"a": 1}) + values({"b": 2})`,
		`upper(s) + lower(s) + join(split(s, ""), "-")`,
	} {
		f.Add(src)
	}
	if data, err := os.ReadFile("../../evaluator/testdata/calls.json"); err == nil {
		var calls any
		if err := json.Unmarshal(data, &calls); err != nil {
			f.Fatal(err)
		}
		for _, src := range sources(calls) {
			f.Add(src)
		}
	}
	env := map[string]any{
		"xs": []any{1, 2, 3}, "ys": []any{"a"}, "n": 4, "s": "ab", "f": func(x any) any { return x },
		"scopes": map[string]any{"root": map[string]any{}}, TickName: func() bool { return true },
		AllocName: func(v any) any { return v }, AllocDeepName: func(v any) any { return v }, MeterName: (*Meter)(nil),
	}
	allow := &Policy{
		Size: func(int) error { return nil }, Let: func(*ast.VariableDeclaratorNode) error { return nil },
		Call: func(*ast.CallNode) error { return nil },
		Name: func(*ast.IdentifierNode, bool, *ast.MemberNode) error { return nil },
	}
	// The same, with every call an effect: compiled without the optimiser.
	effects := *allow
	effects.Effect = func(*ast.CallNode) bool { return true }
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 400 {
			return
		}
		for _, policy := range []*Policy{allow, &effects} {
			p, err := Compile(src, env, Limits{MaxString: 100}, policy)
			if err != nil {
				return
			}
			if found := unbounded(p.Node()); len(found) > 0 {
				t.Fatalf("%s compiles (effects: %v) with %q", src, policy.Effect != nil, found)
			}
		}
	})
}
