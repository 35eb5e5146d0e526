package exprbound

import (
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// Stage is where a compile failed.
type Stage int

// The stages of Compile.
const (
	StageSyntax  Stage = iota + 1 // parsing
	StageType                     // type checking, or compiling the checked tree
	StageRuntime                  // the optimiser folding constants
)

// StageError is a compile failure and its stage; Err is expr's error
// (usually a *file.Error with the position).
type StageError struct {
	Stage Stage
	Err   error
}

func (e *StageError) Error() string { return e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// Compile runs the stages of expr.Compile on src with the sandbox in
// place: it parses once, checks the parsed tree against p ([Check]: it sees
// the tree as written, before the optimiser hides calls inside fused
// builtins), then patches every predicate with the iteration counter
// (TickName must be in env as func() bool), type-checks, folds integer
// constants with overflow checked and makes sums checked (foldPass),
// optimises (unless a call has an effect: Policy.Effect), swaps in the
// bounded and checked operations (opsPass) and compiles that same tree.
// The policy's error is returned as it is; the others are *StageError.
func Compile(src string, env any, l Limits, p *Policy) (*vm.Program, error) {
	ops := newOperations(l)
	cfg := conf.CreateNew()
	opts := append([]expr.Option{expr.Env(env), expr.Patch(TickPatcher{}), expr.MaxNodes(0)}, Functions(l)...)
	for _, o := range opts {
		o(cfg)
	}
	cfg.Check()
	tree, err := parser.ParseWithConfig(src, cfg)
	if err != nil {
		return nil, &StageError{StageSyntax, err}
	}
	if err := Check(tree, p); err != nil {
		return nil, err
	}
	effects := p.Effect != nil && ast.Find(tree.Node, func(n ast.Node) bool {
		c, ok := n.(*ast.CallNode)
		return ok && p.Effect(c)
	}) != nil
	if _, err := new(checker.Checker).PatchAndCheck(tree, cfg); err != nil {
		return nil, &StageError{StageType, err}
	}
	ast.Walk(&tree.Node, foldPass{ops})
	if !effects {
		if err := optimizer.Optimize(&tree.Node, cfg); err != nil {
			return nil, &StageError{StageRuntime, err}
		}
	}
	ast.Walk(&tree.Node, opsPass{ops})
	prog, err := compiler.Compile(tree, cfg)
	if err != nil {
		return nil, &StageError{StageType, err}
	}
	return prog, nil
}
