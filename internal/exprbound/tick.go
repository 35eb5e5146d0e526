package exprbound

import "github.com/expr-lang/expr/ast"

// TickName is the function TickPatcher calls at the start of every
// predicate body; the caller binds it in the environment as func() bool
// and counts iterations in it, since expr's VM cannot be interrupted.
const TickName = "__tick"

// TickCheckEvery is how many ticks a counter lets pass between looks at
// its context (and clock): often enough to stop within microseconds, rare
// enough to cost nothing measurable.
const TickCheckEvery = 1024

// TickPatcher rewrites every predicate body B into `__tick(); B`, so that
// filter, map, reduce, sortBy, ... count each iteration. Use it with
// expr.Patch.
type TickPatcher struct{}

// Visit patches one node.
func (TickPatcher) Visit(node *ast.Node) {
	p, ok := (*node).(*ast.PredicateNode)
	if !ok {
		return
	}
	tick := &ast.CallNode{Callee: &ast.IdentifierNode{Value: TickName}}
	tick.SetLocation(p.Location())
	seq := &ast.SequenceNode{Nodes: []ast.Node{tick, p.Node}}
	seq.SetLocation(p.Node.Location())
	p.Node = seq
}
