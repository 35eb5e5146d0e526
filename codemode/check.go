package codemode

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// The names of the codemode namespace's functions.
const (
	nsName         = "codemode"
	fnCallTool     = "CallTool"
	fnCallToolStrm = "CallToolStream"
	fnGet          = "Get"
)

// reservedPrefix starts the names the runtime adds to programs (the
// iteration counter, the bounded operations).
const reservedPrefix = "__"

// letPrefix is put before every let name once the check has passed.
const letPrefix = reservedPrefix + "v_"

// ToolRef is a tool name the source writes as a string literal.
type ToolRef struct {
	Name string
	// Stream is true for codemode.CallToolStream.
	Stream bool
	// Line and Column locate the literal (1-based).
	Line, Column int
}

// Analysis is what the check of a source found.
type Analysis struct {
	// Tools are the literal tool names, in source order (repeats kept).
	Tools []ToolRef
	// Dynamic is true when some call's tool name is computed at run time.
	Dynamic bool
	// Streams is true when the code calls codemode.CallToolStream.
	Streams bool
	// Nodes is the parsed tree's size.
	Nodes int
}

// UsedTools returns the distinct literal tool names, sorted.
func (a *Analysis) UsedTools() []string {
	var out []string
	for _, r := range a.Tools {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

type collector struct {
	nodes  int
	idents []*ast.IdentifierNode
	calls  []*ast.CallNode
	lets   []*ast.VariableDeclaratorNode
}

func (c *collector) Visit(node *ast.Node) {
	c.nodes++
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		c.idents = append(c.idents, n)
	case *ast.CallNode:
		c.calls = append(c.calls, n)
	case *ast.VariableDeclaratorNode:
		c.lets = append(c.lets, n)
	}
}

// checkSource bounds the source's length before it is parsed. Size limits
// are guardrail-violation, as in the evaluator (DESIGN.md's reasons).
func checkSource(src string, b *Budgets) *Error {
	if len(src) > b.MaxSourceLength {
		if n := utf8.RuneCountInString(src); n > b.MaxSourceLength {
			return errorf(GuardrailViolation, "the code is %d characters, over the limit of %d", n, b.MaxSourceLength)
		}
	}
	return nil
}

// checkTree is the whitelist: it walks the parsed tree and refuses every
// name and call but codemode.CallTool, codemode.CallToolStream,
// codemode.Get and the program's own let names. The builtins of the Expr
// language (len, map, filter, ...) are not calls in the tree and stay.
func checkTree(tree *parser.Tree, src string, b *Budgets) (*Analysis, *Error) {
	c := &collector{}
	ast.Walk(&tree.Node, c)
	a := &Analysis{Nodes: c.nodes}
	if c.nodes > b.MaxNodes {
		return nil, errorf(GuardrailViolation, "the code has %d nodes, over the limit of %d", c.nodes, b.MaxNodes)
	}
	declared := map[string]bool{}
	for _, l := range c.lets {
		if strings.HasPrefix(l.Name, reservedPrefix) || l.Name == nsName || l.Name == "$env" {
			return nil, at(errorf(GuardrailViolation, "let name %q is reserved", l.Name), l, src)
		}
		declared[l.Name] = true
	}
	namespace := map[*ast.IdentifierNode]bool{}
	for _, call := range c.calls {
		m, ok := call.Callee.(*ast.MemberNode)
		var id *ast.IdentifierNode
		if ok {
			id, _ = m.Node.(*ast.IdentifierNode)
		}
		if id == nil || id.Value != nsName {
			if cid, ok := call.Callee.(*ast.IdentifierNode); ok && cid.Value == "$env" {
				return nil, at(errorf(UnknownReference, "$env is not available"), cid, src)
			}
			return nil, at(errorf(UnknownReference, "only codemode.CallTool, codemode.CallToolStream and codemode.Get can be called"), call, src)
		}
		prop, ok := m.Property.(*ast.StringNode)
		if !ok || (prop.Value != fnCallTool && prop.Value != fnCallToolStrm && prop.Value != fnGet) {
			return nil, at(errorf(UnknownReference, "codemode has only CallTool, CallToolStream and Get"), m, src)
		}
		namespace[id] = true
		if len(call.Arguments) != 2 {
			args := "(name, args)"
			if prop.Value == fnGet {
				args = "(value, key)"
			}
			return nil, at(errorf(ExpressionType, "codemode.%s takes %s, got %d arguments", prop.Value, args, len(call.Arguments)), call, src)
		}
		if prop.Value == fnGet {
			continue
		}
		stream := prop.Value == fnCallToolStrm
		a.Streams = a.Streams || stream
		lit, ok := call.Arguments[0].(*ast.StringNode)
		if !ok {
			a.Dynamic = true
			continue
		}
		ref := at(&Error{}, lit, src)
		a.Tools = append(a.Tools, ToolRef{Name: lit.Value, Stream: stream, Line: ref.Line, Column: ref.Column})
	}
	// Let names live under a prefix of their own, so that they may shadow
	// a builtin (`let sum = ...`, as in DESIGN.md's example): the checker
	// refuses to redeclare one.
	for _, l := range c.lets {
		l.Name = letPrefix + l.Name
	}
	for _, id := range c.idents {
		if declared[id.Value] {
			id.Value = letPrefix + id.Value
		}
	}
	for _, id := range c.idents {
		switch {
		case namespace[id]:
		case id.Value == "$env":
			return nil, at(errorf(UnknownReference, "$env is not available"), id, src)
		case strings.HasPrefix(id.Value, letPrefix) && declared[id.Value[len(letPrefix):]]:
		case id.Value == nsName:
			return nil, at(errorf(UnknownReference, "codemode is used only to call codemode.CallTool, codemode.CallToolStream or codemode.Get"), id, src)
		default:
			return nil, at(errorf(UnknownReference, "unknown name %q: the environment has only codemode and the program's let names", id.Value), id, src)
		}
	}
	return a, nil
}

// checkTools refuses literal tool names outside the whitelist, at their
// position.
func checkTools(a *Analysis, allowed toolSet) *Error {
	for _, r := range a.Tools {
		if !allowed.has(r.Name) {
			e := errorf(UnknownReference, "tool %q is not allowed here (line %d, column %d)", r.Name, r.Line, r.Column)
			e.Tool, e.Line, e.Column = r.Name, r.Line, r.Column
			return e
		}
	}
	return nil
}

// analyze parses src and runs the whitelist walk, without compiling.
func analyze(src string, b *Budgets) (*Analysis, *Error) {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, fromExpr(ExpressionSyntax, err)
	}
	return checkTree(tree, src, b)
}
