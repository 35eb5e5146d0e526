package evaluator

import (
	"errors"

	"github.com/exprd/exprd/internal/exprbound"
)

// normalize turns a value expr or a host function produced into JSON types
// under the string, array and value-size limits (exprbound.Normalize). It
// returns v itself when nothing needs to change, so normalising a subtree
// of the state allocates nothing.
func normalize(v any, b *Budgets) (any, error) {
	out, _, err := normalizeSized(v, b)
	return out, err
}

// answerFactor is what a host function's answer is charged to the call's
// byte budget per byte of its JSON: the decoded value in Go, as the memory
// budget counts the answers of tools being read.
const answerFactor = 3

// normalizeSized is normalize, with the bytes of JSON it counted.
func normalizeSized(v any, b *Budgets) (any, int, error) {
	n := exprbound.Normalizer{Limits: exprbound.ValueLimits{MaxBytes: b.MaxValueBytes, MaxString: b.MaxStringLength, MaxArray: b.MaxArrayLength}}
	out, err := n.Normalize(v)
	if err != nil {
		return nil, 0, valueError(err)
	}
	return out, n.Size(), nil
}

// valueError gives a refused value its reason: the budget it is over, or
// expression-runtime for a value that is not JSON.
func valueError(err error) *Error {
	var ve *exprbound.ValueError
	if !errors.As(err, &ve) {
		return reasonOf(err)
	}
	switch ve.Over {
	case exprbound.OverBytes:
		return budgetError(BudgetValue, "%s", ve.Message)
	case exprbound.OverString:
		return budgetError(BudgetString, "%s", ve.Message)
	case exprbound.OverArray:
		return budgetError(BudgetArray, "%s", ve.Message)
	}
	return errorf(ExpressionRuntime, "%s", ve.Message)
}
