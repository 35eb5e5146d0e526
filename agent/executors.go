package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/exprd/exprd/codemode"
	"github.com/exprd/exprd/evaluator"
	"github.com/exprd/exprd/utcp"
)

// UTCPExecutor runs calls as the UTCP tool of that full name in reg: the
// arguments are the tool's, checked against its input schema by reg, and
// the result is the provider's answer as JSON. A UTCP failure is an error
// result.
func UTCPExecutor(reg *utcp.Registry, tool string) Executor {
	return ExecutorFunc(func(ctx context.Context, call ToolCall) (Result, error) {
		args, err := objectArgs(call.Arguments)
		if err != nil {
			return Result{}, err
		}
		v, err := reg.Call(ctx, tool, args)
		if err != nil {
			return Result{}, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return Result{}, fmt.Errorf("the tool's answer is not JSON: %v", err)
		}
		return Result{Content: b}, nil
	})
}

// CodeModeParameters is the JSON Schema of the arguments of a
// CodeModeExecutor tool.
const CodeModeParameters = `{"type": "object", "required": ["code"], "additionalProperties": false,
  "properties": {"code": {"type": "string", "description": "An Expr program calling tools with codemode.CallTool(name, args); its last expression is the result."}}}`

// CodeModeExecutor runs calls {"code": "..."} as CodeMode programs in rt that
// may call the given UTCP tools; the result is {"value": ...}, a failed
// program an error result. Each run is bounded by the tool handler's time
// budget, codemode.ToolHandlerTimeout, or by the call's own timeout when
// that ends first. visible, when set, is what the turn's caller sees of the
// registry (codemode.RunOptions.Visible): nothing else is called or named
// to the model, not even as a similar name.
func CodeModeExecutor(rt *codemode.Runtime, tools []string, visible func(name string) bool) Executor {
	return ExecutorFunc(func(ctx context.Context, call ToolCall) (Result, error) {
		var args struct {
			Code *string `json:"code"`
		}
		if err := json.Unmarshal(call.Arguments, &args); err != nil || args.Code == nil {
			return Result{}, errors.New(`the arguments must be {"code": "<program>"}`)
		}
		res, err := rt.Run(ctx, *args.Code, codemode.RunOptions{Tools: tools, Visible: visible,
			Budgets: codemode.Budgets{Timeout: codemode.ToolHandlerTimeout}})
		if err != nil {
			return Result{}, err
		}
		b := make([]byte, 0, len(res.ValueJSON)+10)
		b = append(append(append(b, `{"value":`...), res.ValueJSON...), '}')
		return Result{Content: b}, nil
	})
}

// ExprExecutor runs calls as the evaluator's expr tool t on st: the
// arguments are the tool's input, the result is the answer's JSON, and an
// answer with an error (or a cancelled one) is an error result. A nil host
// ignores writes, declines confirmations and runs no client functions.
func ExprExecutor(ev *evaluator.Evaluator, t *evaluator.Tool, st *evaluator.State, host evaluator.Host) Executor {
	if host == nil {
		host = quietHost{}
	}
	return ExecutorFunc(func(ctx context.Context, call ToolCall) (Result, error) {
		a := ev.Run(ctx, t, st, call.Arguments, host)
		if a.Cancelled && a.Err == nil {
			return Result{}, context.Cause(ctx)
		}
		return Result{Content: a.JSON(), IsError: a.Err != nil}, nil
	})
}

type quietHost struct{}

func (quietHost) Write(context.Context, evaluator.Write) error { return nil }

func (quietHost) Confirm(context.Context, int, string) (bool, error) { return false, nil }

func (quietHost) CallClient(_ context.Context, name string, _ map[string]any) (any, error) {
	return nil, fmt.Errorf("client function %s: no client to ask", name)
}

func objectArgs(raw json.RawMessage) (map[string]any, error) {
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, errors.New("the arguments are not a JSON object")
	}
	return args, nil
}
