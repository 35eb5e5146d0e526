package codemode

import (
	"errors"
	"unicode/utf8"

	"github.com/expr-lang/expr/vm"

	"github.com/exprd/exprd/internal/exprbound"
)

// toolFunc is the type of the namespace's functions in the environment:
// expr's VM calls a func(...any) any directly, and any other through
// reflect, which took a tenth of a run's CPU in a profile of a three-call
// chain on loopback (BenchmarkChain). A function
// fails by panicking with its error (must), as the VM itself does with a
// function's returned error: either way Run gets it wrapped with the
// call's position. It must stay an alias: expr picks OpCallFast by the
// function's shape, then asserts func(...any) any at run time, which a
// defined type would fail.
type toolFunc = func(args ...any) any

// must is v, or a panic with err for the VM to recover.
func must(v any, err error) any {
	if err != nil {
		panic(err)
	}
	return v
}

// namespace is `codemode` in the environment: the functions bound to one
// run.
type namespace struct {
	CallTool       toolFunc
	CallToolStream toolFunc
	Get            toolFunc
}

// program is a compiled source and what its check found. Programs are
// immutable and shared between runs.
type program struct {
	prog     *vm.Program
	analysis *Analysis
}

// programKey is the source and the budgets that change how it compiles.
type programKey struct {
	src                       string
	maxNodes, maxStringLength int
}

// compile compiles src with the sandbox (exprbound.Compile) under the
// policy, as the evaluator does.
func compile(src string, b *Budgets) (*program, *Error) {
	if err := checkSource(src, b); err != nil {
		return nil, err
	}
	env := map[string]any{nsName: namespace{}, exprbound.TickName: func() bool { return true },
		exprbound.AllocName: func(v any) any { return v }, exprbound.AllocDeepName: func(v any) any { return v },
		exprbound.MeterName: (*exprbound.Meter)(nil)}
	limit := b.MaxStringLength
	a := &Analysis{}
	p, err := exprbound.Compile(src, env, exprbound.Limits{
		MaxString: limit,
		TooLong:   func(msg string) error { return budgetError(BudgetString, "%s", msg) },
		TooCostly: func(msg string) error { return budgetError(BudgetTime, "%s", msg) },
		Normalize: func(v any) (any, error) { return jsonValue(v, limit*utf8.UTFMax) },
	}, policy(src, b, a))
	if err != nil {
		return nil, compileError(err)
	}
	return &program{prog: p, analysis: a}, nil
}

// compileError gives a compile failure its reason: the policy's own, or
// the stage's (syntax, type; runtime where the optimiser folds 7 % 0).
func compileError(err error) *Error {
	var e *Error
	var se *exprbound.StageError
	switch {
	case errors.As(err, &e):
		return e
	case errors.As(err, &se) && se.Stage == exprbound.StageSyntax:
		return fromExpr(ExpressionSyntax, se.Err)
	case errors.As(err, &se) && se.Stage == exprbound.StageRuntime:
		return fromExpr(ExpressionRuntime, se.Err)
	}
	return fromExpr(ExpressionType, err)
}
