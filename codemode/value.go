package codemode

import (
	"errors"

	"github.com/exprd/exprd/internal/exprbound"
)

// jsonValue turns a value the program or a tool produced into JSON types,
// refusing one whose JSON would be over limit bytes before building it
// (exprbound.Normalize).
func jsonValue(v any, limit int) (any, error) {
	out, _, err := jsonValueSized(v, limit)
	return out, err
}

// jsonValueSized is jsonValue with the bytes of JSON it counted.
func jsonValueSized(v any, limit int) (any, int, error) {
	n := exprbound.Normalizer{Limits: exprbound.ValueLimits{MaxBytes: limit}}
	out, err := normalize(&n, v)
	return out, n.Size(), err
}

// resultFactor is what a tool's result is charged to the run's byte
// budget per byte of its JSON: the decoded value in Go, as the memory
// budget counts the answers of tools being read.
const resultFactor = 3

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
