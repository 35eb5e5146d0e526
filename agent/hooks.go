package agent

import (
	"context"

	"github.com/exprd/exprd/model"
)

// PrepareStep is what a step sends the model. The PrepareStep hook gets it
// before the model is called and may change it for that step only.
type PrepareStep struct {
	Step int
	// Messages are the turn's messages so far, without Config.System (it is
	// always sent first).
	Messages []model.Message
	// ActiveTools are the names of the tools offered to the model and
	// callable in the step; a call of any other tool is a missing tool.
	ActiveTools []string
	ToolChoice  model.ToolChoice
	Model       string
}

// PreToolCall is the PreToolCall hook's answer.
type PreToolCall struct {
	// Call, when it has an ID or a name, replaces the call. Its ID must be
	// the call's ID, or the turn fails with ErrCallIDMismatch.
	Call ToolCall
	// Result, when set, is the call's result: nothing runs, and
	// PostToolCall is not called.
	Result *Result
}

// Hooks are the steps of the loop a caller subscribes to. A nil field is
// not subscribed. A hook error fails the turn: Run returns it, wrapped with
// ErrHook.
type Hooks struct {
	// PrepareStep may change the messages, active tools, tool choice and
	// model of one step.
	PrepareStep func(ctx context.Context, p PrepareStep) (PrepareStep, error)
	// PreToolCall may replace a call, or return its result and skip it.
	PreToolCall func(ctx context.Context, step int, call ToolCall) (PreToolCall, error)
	// PostToolCall may replace a result. It is not run when PreToolCall
	// returned a result, or when the tool was missing, not runnable (no
	// executor, denied, or the step stopped for length) or given invalid
	// arguments.
	PostToolCall func(ctx context.Context, step int, call ToolCall, r Result) (Result, error)
}

// Approval decides a call of a tool that needs approval, before it runs. A
// denial is an error result carrying reason; an error fails the turn.
type Approval func(ctx context.Context, step int, call ToolCall) (approved bool, reason string, err error)

// Events are told what the loop does as it happens. Nil fields are ignored.
// They are called from the loop's goroutines, several at a time while a
// step's tools run: a handler that sends must serialise its sends.
type Events struct {
	StepStarted       func(step int)
	TextDelta         func(step int, text string)
	ToolCallRequested func(step int, call ToolCall)
	ToolResult        func(step int, call ToolCall, r Result)
	// Replied tells a step's model answer (Results empty), before its
	// calls run; HistoryGrew, the messages the step adds to the history
	// (its answer with each call as it ran, then the results), before
	// StepFinished. With StepFinished and ToolResult, they are what a
	// turn records to be resumed elsewhere (Config.Resume).
	Replied     func(step int, r Reply)
	HistoryGrew func(step int, msgs []model.Message)
	// CallExecuting tells that a call's executor is about to run: its
	// hooks and approval are behind it. A call a Resume finds without it
	// never ran, and runs from the start (approval and hooks asked again).
	CallExecuting func(step int, call ToolCall)
	StepFinished  func(s Step)
}
