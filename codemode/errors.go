package codemode

import (
	"errors"
	"fmt"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"

	"github.com/exprd/exprd/evaluator"
)

// Reason is why a program failed: one of the evaluator's reasons, or
// InvalidPlan.
type Reason = evaluator.Reason

// The reasons a run or a plan fails with.
const (
	ExpressionSyntax   = evaluator.ExpressionSyntax
	ExpressionType     = evaluator.ExpressionType
	UnknownReference   = evaluator.UnknownReference
	GuardrailViolation = evaluator.GuardrailViolation
	BudgetExceeded     = evaluator.BudgetExceeded
	InvalidArguments   = evaluator.InvalidArguments
	HostFunction       = evaluator.HostFunction
	ExpressionRuntime  = evaluator.ExpressionRuntime
	// InvalidPlan: the model's plan failed its checks, even after the
	// repair round.
	InvalidPlan Reason = "invalid-plan"
)

// Reasons is the closed set a *Error's Reason comes from.
var Reasons = append(append([]Reason(nil), evaluator.Reasons...), InvalidPlan)

// The budgets a budget-exceeded error names.
const (
	BudgetTime       = evaluator.BudgetTime
	BudgetIterations = evaluator.BudgetIterations
	BudgetMemory     = evaluator.BudgetMemory
	BudgetString     = evaluator.BudgetString
	BudgetAlloc      = evaluator.BudgetAlloc
	BudgetToolCalls  = "tool_calls"
	BudgetResult     = "result_bytes"
)

// Error is a program's failure, before or while it ran: what a client sees
// (reason, message, position), never a provider's raw error text.
type Error struct {
	Reason  Reason
	Message string
	// Line and Column locate the failure in the source (1-based), 0 when
	// unknown.
	Line, Column int
	// Budget names the budget a budget-exceeded error ran out of.
	Budget string
	// Tool is the tool whose call failed, for host-function errors and
	// refused tool names.
	Tool string
	// cause is kept for errors.Is (context.Canceled, utcp's sentinels) and
	// logs.
	cause error
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Message }

// Unwrap returns the underlying cause: a utcp error for a tool's failure,
// the context's error for a cancelled run.
func (e *Error) Unwrap() error { return e.cause }

func errorf(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func budgetError(kind, format string, args ...any) *Error {
	e := errorf(BudgetExceeded, format, args...)
	e.Budget = kind
	return e
}

// at positions e at node n of src.
func at(e *Error, n ast.Node, src string) *Error {
	fe := (&file.Error{Location: n.Location(), Message: e.Message}).Bind(file.NewSource(src))
	return positioned(e, fe)
}

// positioned copies e with fe's line and column.
func positioned(e *Error, fe *file.Error) *Error {
	c := *e
	if fe.Line > 0 {
		c.Line, c.Column = fe.Line, fe.Column+1
		c.Message = fmt.Sprintf("%s (line %d, column %d)", e.Message, c.Line, c.Column)
	}
	return &c
}

// fromExpr turns an error of expr's parser, checker or compiler into ours.
func fromExpr(reason Reason, err error) *Error {
	var fe *file.Error
	if errors.As(err, &fe) {
		return positioned(errorf(reason, "%s", strings.ReplaceAll(fe.Message, letPrefix, "")), fe)
	}
	return errorf(reason, "%s", strings.ReplaceAll(err.Error(), letPrefix, ""))
}
