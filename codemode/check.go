package codemode

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/exprd/exprd/internal/exprbound"
)

// The names of the codemode namespace's functions.
const (
	nsName         = "codemode"
	fnCallTool     = "CallTool"
	fnCallToolStrm = "CallToolStream"
	fnGet          = "Get"
)

// letPrefix is put before every let name once the check has passed.
const letPrefix = exprbound.ReservedPrefix + "v_"

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

// checkSource bounds the source's length before it is parsed. Size limits
// are guardrail-violation, as in the evaluator (docs/exprtool.md#reasons).
func checkSource(src string, b *Budgets) *Error {
	if len(src) > b.MaxSourceLength {
		if n := utf8.RuneCountInString(src); n > b.MaxSourceLength {
			return errorf(GuardrailViolation, "the code is %d characters, over the limit of %d", n, b.MaxSourceLength)
		}
	}
	return nil
}

// policy is the whitelist: the only calls are codemode.CallTool,
// codemode.CallToolStream and codemode.Get, and the only names the
// program's own let names, which live under letPrefix so that they may
// shadow a builtin (`let sum = ...`, as in docs/codemode.md's example). The
// builtins of the Expr language (len, map, filter, ...) are not calls in
// the tree and stay. What the check finds goes into a.
func policy(src string, b *Budgets, a *Analysis) *exprbound.Policy {
	return &exprbound.Policy{
		Size: func(nodes int) error {
			a.Nodes = nodes
			if nodes > b.MaxNodes {
				return errorf(GuardrailViolation, "the code has %d nodes, over the limit of %d", nodes, b.MaxNodes)
			}
			return nil
		},
		Let: func(l *ast.VariableDeclaratorNode) error {
			if strings.HasPrefix(l.Name, exprbound.ReservedPrefix) || l.Name == nsName || l.Name == "$env" {
				return at(errorf(GuardrailViolation, "let name %q is reserved", l.Name), l, src)
			}
			return nil
		},
		Call:   func(call *ast.CallNode) error { return checkCall(call, src, a) },
		Effect: callsTool,
		Name: func(id *ast.IdentifierNode, declared bool, _ *ast.MemberNode) error {
			switch {
			case id.Value == "$env":
				return at(errorf(UnknownReference, "$env is not available"), id, src)
			case declared:
				return nil
			case id.Value == nsName:
				return at(errorf(UnknownReference, "codemode is used only to call codemode.CallTool, codemode.CallToolStream or codemode.Get"), id, src)
			}
			return at(errorf(UnknownReference, "unknown name %q: the environment has only codemode and the program's let names", id.Value), id, src)
		},
		LetPrefix: letPrefix,
	}
}

// checkCall allows a call of one of the namespace's functions with two
// arguments, noting the tool names written as literals.
func checkCall(call *ast.CallNode, src string, a *Analysis) error {
	m, ok := call.Callee.(*ast.MemberNode)
	var id *ast.IdentifierNode
	if ok {
		id, _ = m.Node.(*ast.IdentifierNode)
	}
	if id == nil || id.Value != nsName {
		if cid, ok := call.Callee.(*ast.IdentifierNode); ok && cid.Value == "$env" {
			return at(errorf(UnknownReference, "$env is not available"), cid, src)
		}
		return at(errorf(UnknownReference, "only codemode.CallTool, codemode.CallToolStream and codemode.Get can be called"), call, src)
	}
	prop, ok := m.Property.(*ast.StringNode)
	if !ok || (prop.Value != fnCallTool && prop.Value != fnCallToolStrm && prop.Value != fnGet) {
		return at(errorf(UnknownReference, "codemode has only CallTool, CallToolStream and Get"), m, src)
	}
	if len(call.Arguments) != 2 {
		args := "(name, args)"
		if prop.Value == fnGet {
			args = "(value, key)"
		}
		return at(errorf(ExpressionType, "codemode.%s takes %s, got %d arguments", prop.Value, args, len(call.Arguments)), call, src)
	}
	if prop.Value == fnGet {
		return nil
	}
	stream := prop.Value == fnCallToolStrm
	a.Streams = a.Streams || stream
	lit, ok := call.Arguments[0].(*ast.StringNode)
	if !ok {
		a.Dynamic = true
		return nil
	}
	ref := at(&Error{}, lit, src)
	a.Tools = append(a.Tools, ToolRef{Name: lit.Value, Stream: stream, Line: ref.Line, Column: ref.Column})
	return nil
}

// callsTool reports whether a call (one checkCall allowed) runs a tool:
// codemode.CallTool or CallToolStream, not Get.
func callsTool(call *ast.CallNode) bool {
	m, ok := call.Callee.(*ast.MemberNode)
	if !ok {
		return false
	}
	prop, ok := m.Property.(*ast.StringNode)
	return ok && (prop.Value == fnCallTool || prop.Value == fnCallToolStrm)
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

// analyze parses src and checks it, without compiling.
func analyze(src string, b *Budgets) (*Analysis, *Error) {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, fromExpr(ExpressionSyntax, err)
	}
	a := &Analysis{}
	if err := exprbound.Check(tree, policy(src, b, a)); err != nil {
		return nil, compileError(err)
	}
	return a, nil
}
