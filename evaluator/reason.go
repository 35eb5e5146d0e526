package evaluator

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Reason says why a call failed, in the closed set the model is told about.
type Reason string

// The reasons, as docs/exprtool.md#reasons lists them.
const (
	InvalidEntry       Reason = "invalid-entry"
	ExpressionSyntax   Reason = "expression-syntax"
	ExpressionType     Reason = "expression-type"
	UnknownReference   Reason = "unknown-reference"
	GuardrailViolation Reason = "guardrail-violation"
	BudgetExceeded     Reason = "budget-exceeded"
	InvalidArguments   Reason = "invalid-arguments"
	HostFunction       Reason = "host-function"
	ExpressionRuntime  Reason = "expression-runtime"
)

// Reasons lists every reason, in the order of docs/exprtool.md#reasons.
var Reasons = []Reason{
	InvalidEntry, ExpressionSyntax, ExpressionType, UnknownReference,
	GuardrailViolation, BudgetExceeded, InvalidArguments, HostFunction,
	ExpressionRuntime,
}

// Error is a failure the model should see and fix.
type Error struct {
	Reason  Reason
	Message string
	// Step is the step's index, or -1 for the call as a whole and the read.
	Step int
	// Line and Column locate an expression error (1-based), 0 when unknown.
	Line, Column int
	// Budget names the budget a budget-exceeded error ran out of: one of
	// the Budget* kinds.
	Budget string
}

// The kinds of budget a budget-exceeded error names.
const (
	BudgetIterations = "iterations"
	BudgetTime       = "time"
	BudgetMemory     = "memory"
	BudgetString     = "string_length"
	BudgetArray      = "array_length"
	BudgetValue      = "value_bytes"
	BudgetRead       = "read_chars"
	BudgetState      = "state_bytes"
	BudgetAlloc      = "alloc_bytes"
	BudgetCalls      = "function_calls"
)

// budgetError is a budget-exceeded error naming its budget.
func budgetError(kind, format string, args ...any) *Error {
	e := errorf(BudgetExceeded, format, args...)
	e.Budget = kind
	return e
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Message }

func errorf(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...), Step: -1}
}

// reasonOf returns the *Error in err's chain, or wraps err as
// expression-runtime.
func reasonOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Reason: ExpressionRuntime, Message: err.Error(), Step: -1}
}

// Answer is what the model gets back for a call.
type Answer struct {
	// ValueJSON is the read value, set only when the call had a read.
	ValueJSON json.RawMessage
	Declined  bool
	Err       *Error
	// Cancelled is set when the caller's context ended the call.
	Cancelled bool
	// EvalTime is the evaluation time the call used: the time budget's
	// measure, without waits on the user or on host functions.
	EvalTime time.Duration
	// Allocated is what the call's programs built and its host functions
	// answered, in bytes, as the byte budget (MaxAllocBytes) counts them.
	Allocated int64
}

// JSON renders the answer in one of its four shapes: {}, {"value": V},
// {"declined": true} or {"error": {"reason", "message"}}
// (docs/exprtool.md#answers).
func (a Answer) JSON() []byte {
	switch {
	case a.Err != nil:
		b, _ := json.Marshal(map[string]any{"error": map[string]string{
			"reason": string(a.Err.Reason), "message": a.Err.Message,
		}})
		return b
	case a.Declined:
		return []byte(`{"declined":true}`)
	case a.ValueJSON != nil:
		b := make([]byte, 0, len(a.ValueJSON)+10)
		b = append(b, `{"value":`...)
		b = append(b, a.ValueJSON...)
		return append(b, '}')
	default:
		return []byte(`{}`)
	}
}

// Reason returns the answer's error reason, or "".
func (a Answer) Reason() Reason {
	if a.Err == nil {
		return ""
	}
	return a.Err.Reason
}
