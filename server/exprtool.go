package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/status"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
)

// exprTool serves exprd.v1.ExprTool: Describe, Call, and Session
// (session.go).
type exprTool struct {
	exprdv1.UnimplementedExprToolServer
	s *Server
}

// Describe renders the tool and the prompt partials for the settings.
func (e *exprTool) Describe(ctx context.Context, req *exprdv1.DescribeRequest) (*exprdv1.DescribeResponse, error) {
	t, err := e.s.tool(ctx, req.GetSettings(), nil)
	if err != nil {
		return nil, err
	}
	d := t.Describe()
	return &exprdv1.DescribeResponse{
		Name:             d.Name,
		Description:      d.Description,
		InputSchemaJson:  jsonText(d.InputSchema),
		OutputSchemaJson: jsonText(d.OutputSchema),
		CorePrompt:       d.CorePrompt,
		FunctionsPrompt:  d.FunctionsPrompt,
	}, nil
}

// Call runs one call on the state sent with it. Nobody can be asked, so a
// confirm is declined and client-run functions are unknown-reference.
func (e *exprTool) Call(ctx context.Context, req *exprdv1.CallRequest) (*exprdv1.CallResponse, error) {
	s := e.s
	t, err := s.tool(ctx, req.GetSettings(), req.GetBudgets(), evaluator.ClientUnreachable())
	if err != nil {
		return nil, err
	}
	st := evaluator.NewState(s.opts.maxStateBytes)
	mem := s.opts.memory.EmptyFor(ctx, "the call's state")
	defer mem.Close() // a change arriving after the handler returns reserves nothing
	st.UseMemory(mem)
	if len(req.GetStateJson()) > 0 {
		if err := st.ReplaceContext(ctx, []byte(req.GetStateJson())); err != nil {
			return nil, stateStatus("state_json", err)
		}
	}
	h := &unaryHost{}
	a := s.eval.Run(ctx, t, st, []byte(req.GetInputJson()), h)
	s.metrics.answered(ctx, "exprtool", a)
	if a.Cancelled {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &exprdv1.CallResponse{AnswerJson: jsonText(a.JSON()), Reason: string(a.Reason()), Writes: h.writes}, nil
}

// unaryHost collects writes; it has nobody to ask.
type unaryHost struct {
	writes []*exprdv1.StepWrite
}

func (h *unaryHost) Write(_ context.Context, w evaluator.Write) error {
	h.writes = append(h.writes, &exprdv1.StepWrite{Step: uint32(w.Step), Path: w.Path, ValueJson: jsonText(w.ValueJSON)})
	return nil
}

func (h *unaryHost) Confirm(context.Context, int, string) (bool, error) { return false, nil }

// CallClient is never reached: ClientUnreachable keeps client-run functions
// out of unary calls.
func (h *unaryHost) CallClient(context.Context, string, map[string]any) (any, error) {
	return nil, errors.New("a unary call has no client to ask")
}
