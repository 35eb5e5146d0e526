package exprbound

import (
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// ReservedPrefix starts the names the sandbox adds to programs: the
// iteration counter, the bounded operations, the sort's variable. A policy
// keeps expressions from naming or declaring them.
const ReservedPrefix = "__"

// Policy is what a program may name and call: the part of the sandbox each
// of its users words for itself. [Check] asks its funcs in this order and
// returns the first error as it is, so each func words (and positions) its
// own refusals; a nil error allows.
type Policy struct {
	// Size judges the tree's size in nodes, before anything else.
	Size func(nodes int) error
	// Let judges each let name, in source order.
	Let func(l *ast.VariableDeclaratorNode) error
	// Call judges each call, in source order: what it calls and how many
	// arguments it passes.
	Call func(c *ast.CallNode) error
	// Name judges each identifier read as a value, in source order: every
	// identifier but a call's callee or the object of its callee
	// (`f(x)`, `codemode.Get(v, k)`), which Call judged. declared is true
	// when a let of the program has the name; member is the member
	// expression the identifier is the object of (`scopes.root`), if any.
	Name func(id *ast.IdentifierNode, declared bool, member *ast.MemberNode) error
	// Done, when set, is asked last, once every name has passed: a policy
	// may keep a refusal for it, to report it after those of the names.
	Done func() error
	// Effect, when set, reports whether a call may have an effect beyond
	// its value (a tool, a host function). A program with such a call is
	// compiled without expr's optimiser, whose rewrites keep the value but
	// run a body fewer times than the program says:
	// len(map(filter(xs, p), f(#))) calls f for no item, map(...)[0] and
	// count(xs, f(#)) > 0 stop at the first. Each call then runs as
	// written (any, all and none still stop at their answer, as the
	// language says).
	Effect func(c *ast.CallNode) bool
	// LetPrefix, when not empty, is put before every let name and every
	// read of one once the check has passed, so that a let may shadow a
	// builtin (`let sum = ...`), which expr's checker refuses to redeclare.
	// It should start with ReservedPrefix, which no let may.
	LetPrefix string
}

// Check walks the tree as parsed, not the optimised program whose fused
// builtins hide calls, and asks p about every name and call in it. expr
// cannot disable its builtins, which are not calls in the tree: this walk
// is the whitelist.
func Check(tree *parser.Tree, p *Policy) error {
	w := walk{callees: map[*ast.IdentifierNode]bool{}, members: map[*ast.IdentifierNode]*ast.MemberNode{}}
	ast.Walk(&tree.Node, &w)
	if err := p.Size(w.nodes); err != nil {
		return err
	}
	declared := make(map[string]bool, len(w.lets))
	for _, l := range w.lets {
		if err := p.Let(l); err != nil {
			return err
		}
		declared[l.Name] = true
	}
	for _, c := range w.calls {
		if err := p.Call(c); err != nil {
			return err
		}
	}
	for _, id := range w.idents {
		if w.callees[id] {
			continue
		}
		if err := p.Name(id, declared[id.Value], w.members[id]); err != nil {
			return err
		}
	}
	if p.Done != nil {
		if err := p.Done(); err != nil {
			return err
		}
	}
	if p.LetPrefix != "" {
		for _, l := range w.lets {
			l.Name = p.LetPrefix + l.Name
		}
		for _, id := range w.idents {
			if declared[id.Value] {
				id.Value = p.LetPrefix + id.Value
			}
		}
	}
	return nil
}

// walk gathers, in one pass, what Check asks about. ast.Walk visits
// children before their parent, which is source order for the nodes
// gathered here.
type walk struct {
	nodes   int
	idents  []*ast.IdentifierNode
	calls   []*ast.CallNode
	lets    []*ast.VariableDeclaratorNode
	callees map[*ast.IdentifierNode]bool
	members map[*ast.IdentifierNode]*ast.MemberNode
}

func (w *walk) Visit(node *ast.Node) {
	w.nodes++
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		w.idents = append(w.idents, n)
	case *ast.CallNode:
		w.calls = append(w.calls, n)
		switch c := n.Callee.(type) {
		case *ast.IdentifierNode:
			w.callees[c] = true
		case *ast.MemberNode:
			if id, ok := c.Node.(*ast.IdentifierNode); ok {
				w.callees[id] = true
			}
		}
	case *ast.VariableDeclaratorNode:
		w.lets = append(w.lets, n)
	case *ast.MemberNode:
		if id, ok := n.Node.(*ast.IdentifierNode); ok {
			w.members[id] = n
		}
	}
}
