package evaltest

import (
	"context"
	"fmt"

	"github.com/exprd/exprd/evaluator"
)

// Result is what one run of a case produced.
type Result struct {
	Answer      evaluator.Answer
	Writes      []evaluator.Write
	Confirms    []Confirm
	ClientCalls []ClientCall
	StateAfter  map[string]any
}

// Run runs c once with e on a new state and a new [Host]. Its error is a
// case the evaluator cannot be set up for (settings or state); what the
// call did is in the Result, for [Check].
func Run(ctx context.Context, e *evaluator.Evaluator, c Case, opts ...evaluator.ToolOption) (Result, error) {
	tool, err := evaluator.NewTool(c.Settings(), c.Budgets(), opts...)
	if err != nil {
		return Result{}, fmt.Errorf("NewTool: %w", err)
	}
	st := evaluator.NewState()
	if err := st.Replace(c.StateJSON()); err != nil {
		return Result{}, fmt.Errorf("state: %w", err)
	}
	h := NewHost(c.Confirm)
	a := e.Run(ctx, tool, st, c.InputJSON(), h)
	return Result{
		Answer:      a,
		Writes:      h.Writes(),
		Confirms:    h.Confirms(),
		ClientCalls: h.ClientCalls(),
		StateAfter:  st.Snapshot(),
	}, nil
}
