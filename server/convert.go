package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/exprd/exprd/evaluator"
	exprdv1 "github.com/exprd/exprd/gen/exprd/v1"
	"github.com/exprd/exprd/server/internal/rpcstatus"
	"github.com/exprd/exprd/utcp/toolscope"
)

// settings turns the wire settings into the evaluator's, resolving
// server-run functions in the server's catalogue: its own functions, then
// the registry's tools that view (the caller's tools: scopes) sees.
func (s *Server) settings(view toolscope.View, in *exprdv1.Settings) (evaluator.Settings, error) {
	out := evaluator.Settings{Read: in.GetRead(), Note: in.GetNote()}
	var err error
	if out.Functions, err = s.functions(view, in.GetFunctions(), "settings.functions"); err != nil {
		return out, err
	}
	if ts := in.GetToolFunctions(); ts != nil {
		out.HasToolFunctions = true
		if out.ToolFunctions, err = s.functions(view, ts.GetFunctions(), "settings.tool_functions"); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (s *Server) functions(view toolscope.View, in []*exprdv1.Function, field string) ([]evaluator.Function, error) {
	out := make([]evaluator.Function, 0, len(in))
	for i, f := range in {
		ef := evaluator.Function{
			Name:         f.GetName(),
			Description:  f.GetDescription(),
			InputSchema:  json.RawMessage(f.GetInputSchemaJson()),
			OutputSchema: json.RawMessage(f.GetOutputSchemaJson()),
		}
		switch f.GetRunner() {
		case exprdv1.Function_RUNNER_CLIENT:
			ef.Runner = evaluator.RunClient
		case exprdv1.Function_RUNNER_SERVER:
			name := f.GetServerName()
			if name == "" {
				name = f.GetName()
			}
			sf, ok := s.opts.functions[name]
			if !ok && s.opts.registry != nil && view.Sees(name) {
				sf, ok = s.utcpFunction(name)
			}
			if !ok {
				return nil, rpcstatus.BadRequest(fmt.Sprintf("%s[%d].server_name", field, i), fmt.Sprintf("the server has no function %q", name))
			}
			ef.Runner, ef.Impl = evaluator.RunServer, sf.Impl
			// What the client leaves out, the server's definition fills in.
			if ef.Description == "" {
				ef.Description = sf.Description
			}
			if len(ef.InputSchema) == 0 {
				ef.InputSchema = sf.InputSchema
			}
			if len(ef.OutputSchema) == 0 {
				ef.OutputSchema = sf.OutputSchema
			}
		}
		out = append(out, ef)
	}
	return out, nil
}

// budgets lowers the server's maxima by a request's overrides.
func (s *Server) budgets(in *exprdv1.Budgets) (evaluator.Budgets, error) {
	o := evaluator.Budgets{
		Timeout:          time.Duration(in.GetTimeoutMs()) * time.Millisecond,
		MaxIterations:    in.GetMaxIterations(),
		MemoryBudget:     in.GetMemoryBudget(),
		MaxSourceLength:  int(in.GetMaxSourceLength()),
		MaxNodes:         int(in.GetMaxNodes()),
		MaxStringLength:  int(in.GetMaxStringLength()),
		MaxArrayLength:   int(in.GetMaxArrayLength()),
		MaxReadChars:     int(in.GetMaxReadChars()),
		FunctionTimeout:  time.Duration(in.GetFunctionTimeoutMs()) * time.Millisecond,
		MaxSteps:         int(in.GetMaxSteps()),
		MaxValueBytes:    int(in.GetMaxValueBytes()),
		MaxAllocBytes:    int(in.GetMaxAllocBytes()),
		MaxFunctionCalls: int(in.GetMaxFunctionCalls()),
	}
	b, err := s.opts.budgets.Lower(o)
	if err != nil {
		return b, rpcstatus.BadRequest("budgets", err.Error())
	}
	return b, nil
}

func budgetsProto(b evaluator.Budgets) *exprdv1.Budgets {
	return &exprdv1.Budgets{
		TimeoutMs:         uint32(b.Timeout / time.Millisecond),
		MaxIterations:     b.MaxIterations,
		MemoryBudget:      b.MemoryBudget,
		MaxSourceLength:   uint32(b.MaxSourceLength),
		MaxNodes:          uint32(b.MaxNodes),
		MaxStringLength:   uint32(b.MaxStringLength),
		MaxArrayLength:    uint32(b.MaxArrayLength),
		MaxReadChars:      uint32(b.MaxReadChars),
		FunctionTimeoutMs: uint32(b.FunctionTimeout / time.Millisecond),
		MaxSteps:          uint32(b.MaxSteps),
		MaxValueBytes:     uint32(b.MaxValueBytes),
		MaxAllocBytes:     uint64(b.MaxAllocBytes),
		MaxFunctionCalls:  uint32(b.MaxFunctionCalls),
	}
}

// tool builds the evaluator's Tool for a request's settings and budgets;
// its server-run functions may be the registry's tools ctx's caller sees.
func (s *Server) tool(ctx context.Context, settings *exprdv1.Settings, budgets *exprdv1.Budgets, opts ...evaluator.ToolOption) (*evaluator.Tool, error) {
	es, err := s.settings(toolscope.FromContext(ctx), settings)
	if err != nil {
		return nil, err
	}
	b, err := s.budgets(budgets)
	if err != nil {
		return nil, err
	}
	t, err := evaluator.NewTool(es, b, s.opts.toolOptions(opts...)...)
	if err != nil {
		return nil, rpcstatus.BadRequest("settings", err.Error())
	}
	return t, nil
}

func answerProto(callID string, a evaluator.Answer) *exprdv1.Answer {
	return &exprdv1.Answer{CallId: callID, AnswerJson: jsonText(a.JSON()), Reason: string(a.Reason()), Cancelled: a.Cancelled}
}

// decodeJSON is a client's JSON as the evaluator holds values: what
// encoding/json decodes into an any, with the evaluator's wording of a
// syntax error (its offset) and of a number past float64. The evaluator
// should export this (its jsonvalue.Decode); until it does, it is here.
func decodeJSON(b []byte) (any, error) {
	var v any
	err := json.Unmarshal(b, &v)
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &se):
		return nil, fmt.Errorf("%s at offset %d", se.Error(), se.Offset)
	case errors.As(err, &te):
		return nil, fmt.Errorf("%s is out of range of float64", te.Value)
	}
	return v, err
}
