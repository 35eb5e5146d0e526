package evaluator

import (
	"fmt"
	"sort"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
)

// reservedPrefix starts the names the evaluator adds to programs (the
// iteration counter); an expression may neither read nor declare them.
const reservedPrefix = "__"

// collector gathers, in one walk of the parsed tree, what the whitelist
// check needs. ast.Walk visits children before their parent.
type collector struct {
	nodes     int
	declared  map[string]bool
	idents    []*ast.IdentifierNode
	callees   map[*ast.IdentifierNode]bool
	calls     []*ast.CallNode
	scopeRefs []*ast.MemberNode
	lets      []*ast.VariableDeclaratorNode
}

func (c *collector) Visit(node *ast.Node) {
	c.nodes++
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		c.idents = append(c.idents, n)
	case *ast.CallNode:
		c.calls = append(c.calls, n)
		if id, ok := n.Callee.(*ast.IdentifierNode); ok {
			c.callees[id] = true
		}
	case *ast.VariableDeclaratorNode:
		c.declared[n.Name] = true
		c.lets = append(c.lets, n)
	case *ast.MemberNode:
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "scopes" {
			c.scopeRefs = append(c.scopeRefs, n)
		}
	}
}

// checkTree is the whitelist: it walks the parsed tree (not the optimised
// program, whose fused builtins hide calls) and refuses every name and call
// outside scopes, the expression's own let names and the tool's functions.
func checkTree(tree *parser.Tree, t *Tool) *Error {
	c := &collector{declared: map[string]bool{}, callees: map[*ast.IdentifierNode]bool{}}
	ast.Walk(&tree.Node, c)
	at := func(e *Error, n ast.Node) *Error {
		fe := (&file.Error{Location: n.Location(), Message: e.Message}).Bind(tree.Source)
		return fromFileError(e.Reason, fe)
	}
	if c.nodes > t.budgets.MaxNodes {
		return errorf(GuardrailViolation, "the expression has %d nodes, over the limit of %d: split it into steps", c.nodes, t.budgets.MaxNodes)
	}
	for _, l := range c.lets {
		if strings.HasPrefix(l.Name, reservedPrefix) {
			return at(errorf(GuardrailViolation, "let name %q is reserved: names starting with %q are the evaluator's", l.Name, reservedPrefix), l)
		}
	}
	for _, call := range c.calls {
		id, ok := call.Callee.(*ast.IdentifierNode)
		if !ok {
			return at(errorf(UnknownReference, "only the session's functions can be called, by name; this calls a computed value"), call)
		}
		if id.Value == "$env" {
			return at(errorf(UnknownReference, "$env is not available"), id)
		}
		if _, ok := t.funcs[id.Value]; !ok {
			return at(t.unknownFunction(id.Value), id)
		}
	}
	for _, id := range c.idents {
		switch {
		case c.callees[id]:
		case id.Value == "$env":
			return at(errorf(UnknownReference, "$env is not available: read the state through scopes.root"), id)
		case id.Value == "scopes", c.declared[id.Value] && !strings.HasPrefix(id.Value, reservedPrefix):
		default:
			if _, ok := t.funcs[id.Value]; ok {
				break
			}
			return at(errorf(UnknownReference, "unknown name %q: the state is scopes.root, and the functions are %s", id.Value, t.functionList()), id)
		}
	}
	// scopes is read only as scopes.root: the scopes object itself never
	// becomes a value, which lets a call reuse it from step to step.
	rooted := map[*ast.IdentifierNode]bool{}
	for _, m := range c.scopeRefs {
		s, ok := m.Property.(*ast.StringNode)
		switch {
		case c.declared["scopes"]:
		case !ok:
			return at(errorf(UnknownReference, "scopes is read only as scopes.root"), m)
		case s.Value != "root":
			return at(errorf(UnknownReference, "scopes.%s does not exist: only scopes.root is reachable", s.Value), m)
		}
		rooted[m.Node.(*ast.IdentifierNode)] = true
	}
	for _, id := range c.idents {
		if id.Value == "scopes" && !rooted[id] && !c.declared["scopes"] {
			return at(errorf(UnknownReference, "scopes is read only as scopes.root"), id)
		}
	}
	return nil
}

func (t *Tool) unknownFunction(name string) *Error {
	if why, ok := t.refused[name]; ok {
		return errorf(UnknownReference, "function %q cannot be called here: %s", name, why)
	}
	return errorf(UnknownReference, "unknown function %q: the functions are %s", name, t.functionList())
}

func (t *Tool) functionList() string {
	if len(t.names) == 0 {
		return "none"
	}
	return strings.Join(t.names, ", ")
}

// fromFileError turns expr's positioned error into one of ours.
func fromFileError(reason Reason, err *file.Error) *Error {
	msg := err.Message
	if err.Line > 0 {
		msg = fmt.Sprintf("%s (line %d, column %d)%s", err.Message, err.Line, err.Column+1, err.Snippet)
	}
	return &Error{Reason: reason, Message: msg, Step: -1, Line: err.Line, Column: err.Column + 1}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
