package agent

import (
	"context"
	"encoding/json"
	"time"
)

// ToolCall is a call the model asked for.
type ToolCall struct {
	ID, Name string
	// Arguments are the arguments as the model sent them: a JSON object
	// when the call is well formed, anything at all when it is not.
	Arguments json.RawMessage
}

// Result is a tool's answer to a call, sent to the model as the content of
// a tool message.
type Result struct {
	// Content is JSON. An error result is {"error": "..."}.
	Content json.RawMessage
	IsError bool
}

// Executor runs a tool's calls. An error it returns becomes an is_error
// result ({"error": err.Error()}) and the loop goes on.
type Executor interface {
	Execute(ctx context.Context, call ToolCall) (Result, error)
}

// ExecutorFunc adapts a function to [Executor].
type ExecutorFunc func(ctx context.Context, call ToolCall) (Result, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, call ToolCall) (Result, error) {
	return f(ctx, call)
}

var _ Executor = ExecutorFunc(nil)

// Tool is a tool the model may call in a turn.
type Tool struct {
	Name, Description string
	// Parameters is the JSON Schema of the arguments (draft 2020-12 unless
	// it says otherwise); empty: any object. Arguments that fail it are an
	// error result and the tool does not run.
	Parameters json.RawMessage
	// Exec runs the tool. Nil: the tool only describes itself, and calling
	// it is an error result unless a PreToolCall hook returns a result.
	Exec Executor
	// NeedsApproval puts every call to Config.Approve before it runs.
	NeedsApproval bool
	// Timeout bounds one call; 0: Config.ToolTimeout.
	Timeout time.Duration
	// Idempotent says a call may run again when the process running it
	// stopped before its result was recorded (Config.Resume): MCP's
	// idempotentHint or readOnlyHint, a manual's flag, or a client's
	// declaration. Otherwise such a call is answered Interrupted.
	Idempotent bool
}

// ErrorResult is the is_error result carrying msg: {"error": msg}, msg
// cut to MaxErrorBytes.
func ErrorResult(msg string) Result {
	b, _ := json.Marshal(map[string]string{"error": cutText(msg, MaxErrorBytes)}) // a string always marshals
	return Result{Content: b, IsError: true}
}
