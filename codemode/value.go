package codemode

import (
	"errors"

	"github.com/exprd/exprd/internal/exprbound"
)

// jsonValue turns a value the program or a tool produced into JSON types,
// refusing one whose JSON would be over limit bytes before building it
// (exprbound.Normalize).
func jsonValue(v any, limit int) (any, error) {
	n := exprbound.Normalizer{Limits: exprbound.ValueLimits{MaxBytes: limit}}
	return normalize(&n, v)
}

// normalize is n.Normalize with its error as a *Error: result_bytes, or
// expression-runtime for a value that is not JSON.
func normalize(n *exprbound.Normalizer, v any) (any, error) {
	out, err := n.Normalize(v)
	var ve *exprbound.ValueError
	switch {
	case err == nil:
		return out, nil
	case !errors.As(err, &ve):
		return nil, err
	case ve.Over == exprbound.OverBytes:
		return nil, budgetError(BudgetResult, "%s", ve.Message)
	}
	return nil, errorf(ExpressionRuntime, "%s", ve.Message)
}
